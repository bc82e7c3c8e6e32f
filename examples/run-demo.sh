#!/bin/sh
# Install what is missing, build, generate a 1 GiB vault of random experts
# and run the decode-loop demo on it.
set -eu
cd "$(dirname "$0")/.."
. tests/deps.sh
smoe_install_deps
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
mkdir -p out
[ -f out/demo.smoe ] ||
    build/tools/smoe/smoe gen --out out/demo.smoe --layers 16 --experts 64 --blob-bytes 1M --top-k 4
build/examples/decode_loop out/demo.smoe --tokens 64 --requests 3
# Replay a synthetic routing trace: the ring against the page cache, mmap and
# direct reads at equal memory (docs/benchmarks.md).
[ -f out/demo.trace.gz ] ||
    build/tools/smoe/smoe trace-gen -o out/demo.trace.gz --layers 16 --experts 64 --top-k 4 \
        --tokens 256 --overlap 0.43
build/tools/smoe/smoe bench --vault out/demo.smoe --trace out/demo.trace.gz --mode all \
    --memory 25% --tokens 32
