#!/bin/sh
# Line and branch coverage of the parsers by a fuzz corpus (llvm-cov).
#
# Builds the replay drivers with clang's source-based coverage
# (-fprofile-instr-generate -fcoverage-mapping) in build-cov, replays each
# target's corpus and prints llvm-cov's report for the parser's own files.
#
# Usage: tests/fuzz/coverage.sh [CORPUS_ROOT ...]
#   Each CORPUS_ROOT holds <target>/ directories (default: tests/fuzz/corpus;
#   add a long run's working corpus to see what it reached).
set -eu
cd "$(dirname "$0")/../.."
roots=${*:-tests/fuzz/corpus}
profdata=$(command -v llvm-profdata || command -v llvm-profdata-14)
cov=$(command -v llvm-cov || command -v llvm-cov-14)
flags="-fprofile-instr-generate -fcoverage-mapping"
CC=clang cmake -S . -B build-cov -DCMAKE_BUILD_TYPE=Debug -DSMOE_BUILD_EXAMPLES=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build build-cov -j2 --target fuzz_vault_replay fuzz_safetensors_replay \
    fuzz_gguf_replay fuzz_freq_replay >/dev/null

report() { # target, files...
    t=$1
    shift
    dirs=""
    for r in $roots; do
        [ -d "$r/$t" ] && dirs="$dirs $r/$t"
    done
    rm -f build-cov/"$t"-*.profraw
    # shellcheck disable=SC2086
    LLVM_PROFILE_FILE="build-cov/$t-%p.profraw" build-cov/tests/fuzz/fuzz_"$t"_replay $dirs
    "$profdata" merge -sparse -o build-cov/"$t".profdata build-cov/"$t"-*.profraw
    "$cov" report build-cov/tests/fuzz/fuzz_"$t"_replay \
        -instr-profile=build-cov/"$t".profdata "$@"
}
report vault src/vault/vault_read.c src/vault/vault_check.c src/vault/dtype.c
report safetensors tools/smoe/pack/pack_safetensors.c tools/smoe/pack/pack_config.c
report gguf tools/smoe/pack/pack_gguf.c
report freq src/fill/freq.c
