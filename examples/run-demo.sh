#!/bin/sh
# Install what is missing, build the smoe tool and the decode-loop example
# (nothing else), generate a 1 GiB vault of random experts and run the
# decode-loop demo on it; then replay a synthetic routing trace through the
# ring, the page cache, mmap and direct reads (smoe bench), and say in a
# few sentences what the figures showed (examples/summary.awk).
#
# As root, smoe bench makes its comparison at equal memory: it drops the
# machine's page cache before each mode and runs the page-cache modes in a
# temporary memory cgroup. The demo says so before it starts that step;
# SMOE_DEMO_NO_ROOT_STEPS=1 runs the replay without either (the page-cache
# modes then use all free memory, marked NONE).
set -eu
cd "$(dirname "$0")/.."
. tests/progress.sh
. tests/deps.sh
smoe_install_deps
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs" --target smoe decode_loop
smoe=build/tools/smoe/smoe
mkdir -p out
[ -f out/demo.smoe ] ||
    $smoe gen --out out/demo.smoe --layers 16 --experts 64 --blob-bytes 1M --top-k 4
# Output kept for the summary at the end; the pipe's status is tee's, so
# decode_loop's own is passed through a file.
{ build/examples/decode_loop out/demo.smoe --tokens 64 --requests 3 && echo 0 > out/demo-decode.rc ||
    echo $? > out/demo-decode.rc; } | tee out/demo-decode.txt
[ "$(cat out/demo-decode.rc)" = 0 ] || exit 1

# Replay a synthetic routing trace: the ring against the page cache, mmap and
# direct reads at equal memory (docs/benchmarks.md).
[ -f out/demo.trace.gz ] ||
    $smoe trace-gen -o out/demo.trace.gz --layers 16 --experts 64 --top-k 4 \
        --tokens 256 --overlap 0.43
root_steps=""
if [ "$(id -u)" = 0 ] && [ "${SMOE_DEMO_NO_ROOT_STEPS:-0}" != 1 ]; then
    echo "smoe bench runs as root: before each mode it drops this machine's page cache"
    echo "(sync; echo 3 > /proc/sys/vm/drop_caches), and it runs pagecache and mmap in a"
    echo "temporary memory cgroup the size of the ring, removed afterwards."
    echo "SMOE_DEMO_NO_ROOT_STEPS=1 examples/run-demo.sh replays without either."
    if [ -t 0 ]; then
        echo "starting in 5 s (Ctrl-C to stop)"
        sleep 5
    fi
else
    root_steps="--no-drop-caches --no-cgroup"
fi
# shellcheck disable=SC2086
{ $smoe bench --vault out/demo.smoe --trace out/demo.trace.gz --mode all \
    --memory 25% --tokens 32 $root_steps && echo 0 > out/demo-bench.rc ||
    echo $? > out/demo-bench.rc; } | tee out/demo-bench.txt
[ "$(cat out/demo-bench.rc)" = 0 ] || exit 1

# What the two runs showed, in words (examples/summary.awk).
echo
awk -f examples/summary.awk out/demo-decode.txt out/demo-bench.txt
