#!/bin/sh
# Description: the demo's last words (examples/summary.awk) from what
# decode_loop and smoe bench print now: on a small vault and trace, each of
# its two sentences comes out whole, every figure in its place (a changed
# output format would leave blanks).
# Usage: demo_summary.sh SMOE DECODE_LOOP SOURCE_DIR   (ctest: demo_summary)
set -eu
smoe=$1 loop=$2 src=$3
dir=$(mktemp -d "${SMOE_TEST_TMPDIR:-/tmp}/demo-summary-XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
cd "$dir"
fail() { echo "FAIL demo_summary: $*" >&2; exit 1; }
"$smoe" gen --out d.smoe --layers 4 --experts 16 --blob-bytes 64K --top-k 2 > /dev/null
"$smoe" trace-gen -o d.trace.gz --layers 4 --experts 16 --top-k 2 --tokens 16 \
    --overlap 0.43 > /dev/null
"$loop" d.smoe --tokens 8 --requests 2 --idle-ms 1 > dec.txt
"$smoe" bench --vault d.smoe --trace d.trace.gz --mode all --memory 25% --tokens 8 \
    --no-drop-caches --no-cgroup > bench.txt
awk -f "$src/examples/summary.awk" dec.txt bench.txt > summary.txt
cat summary.txt
n='[0-9]+(\.[0-9]+)?'
head -n 1 summary.txt | grep -Eq "^decode_loop: $n tokens/s with (only )?$n of claims served from the ring.*, waiting $n ms a token: (the warm-up read $n of the $n MiB at start-up \\($n GB/s, sequential reads\\), and decoding itself read only $n MiB|decoding read $n MiB, on demand and by pre-warm, beside the warm-up's $n MiB)" ||
    fail "the decode_loop sentence is not whole (dec.txt above its figures):
$(cat dec.txt)"
tail -n 1 summary.txt | grep -Eq "^smoe bench: with $n MiB of memory \\($n% of the vault\\) the ring waited $n ms per token on the routing trace, against direct reads $n ms \\(${n}x as long\\), mmap $n ms \\(${n}x as long\\) and the page cache $n ms \\(${n}x as long\\); but the page cache and mmap could use all free memory" ||
    fail "the smoe bench sentence is not whole"
[ "$(wc -l < summary.txt)" -eq 2 ] || fail "not two sentences"
echo "ok demo_summary: both sentences whole"
