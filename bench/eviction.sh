#!/bin/sh
# bench/eviction.sh - reproduce every table of docs/eviction.md.
#
# usage: bench/eviction.sh TRACE_DIR [SMOE [BENCH_EVICT]]
#   TRACE_DIR  the folder of the real routing traces (gpt-oss-20b-*.trace.gz,
#              mixtral8x7b-*.trace)
#   SMOE       the smoe tool (default build/tools/smoe/smoe)
#   BENCH_EVICT the scan micro-benchmark (default build/bench/bench_evict)
# SMOE_EVICTION_LIBRARY=1 also runs the library sections (12 and 13: the
# library in `smoe bench`, about 15 minutes, needs root for the page cache
# limits, writes vaults of 50 MiB and 3 GiB under $TMPDIR).
# Output: one section per table, as printed by `smoe sim`. The synthetic
# traces are written by `smoe trace-gen` into a temporary folder, removed
# at the end. About ten minutes on one core.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 TRACE_DIR [SMOE]" >&2
    exit 2
fi
T=$1
SMOE=${2:-build/tools/smoe/smoe}
BENCH_EVICT=${3:-build/bench/bench_evict}
GPT="$T/gpt-oss-20b-mmlu-test.trace.gz $T/gpt-oss-20b-sorry-bench-base.trace.gz"
MIX="$T/mixtral8x7b-gsm8k-0.trace $T/mixtral8x7b-gsm8k-1.trace \
$T/mixtral8x7b-humaneval-0.trace $T/mixtral8x7b-humaneval-1.trace"
SYN=$(mktemp -d)
trap 'rm -rf "$SYN"' EXIT

section() {
    printf '\n## %s\n$ %s\n' "$1" "$2"
    # shellcheck disable=SC2086
    $2
}

section "1. Shared traces, decode, every token" "$SMOE sim $GPT $MIX"
section "2. Held out: second halves (choices were made on the first halves)" \
    "$SMOE sim --half 2 $GPT"
section "3. Tuning halves" "$SMOE sim --half 1 $GPT"
section "4. Prefill-like: 32 tokens per layer step" "$SMOE sim --group 32 $GPT $MIX"
section "5. Tokens shuffled" "$SMOE sim --shuffle-tokens 1 $GPT $MIX"
section "6. Layers shuffled within each token" "$SMOE sim --shuffle-layers 1 $GPT $MIX"
section "7. Two one-shot reads of random experts after each step" \
    "$SMOE sim --one-shot 2 $GPT $MIX"

gen() {
    name=$1
    shift
    "$SMOE" trace-gen -o "$SYN/$name.trace" "$@" >/dev/null
}
gen base --tokens 4000 --requests 20 --seed 11
gen wide --tokens 3000 --layers 48 --experts 128 --top-k 8 --skew 1.0 --overlap 0.3 --seed 12
gen mid --tokens 3000 --layers 26 --experts 64 --top-k 6 --skew 0.5 --overlap 0.5 --seed 13
gen short --tokens 3000 --layers 16 --experts 64 --top-k 8 --overlap 0.2 --requests 30 --seed 14
gen uniform --tokens 3000 --skew 0 --overlap 0 --seed 15
gen popular --tokens 3000 --skew 1.5 --overlap 0 --seed 16
gen repeat --tokens 3000 --skew 0.3 --overlap 0.95 --seed 17
section "8. Synthetic traces (smoe trace-gen)" "$SMOE sim $SYN/base.trace $SYN/wide.trace \
$SYN/mid.trace $SYN/short.trace $SYN/uniform.trace $SYN/popular.trace $SYN/repeat.trace"

HELD="--half 2 $GPT"
section "9a. reuse as chosen, held out" "$SMOE sim --policy reuse $HELD"
section "9b. without the distance term" "$SMOE sim --policy reuse --lambda 0 $HELD"
section "9c. without learning (start weights)" "$SMOE sim --policy reuse --rate 0 $HELD"
section "9d. without the history bits" "$SMOE sim --policy reuse --no-history $HELD"
section "9e. current layer counted as passed" "$SMOE sim --policy reuse --no-current $HELD"
section "9f. Mixtral, as chosen" "$SMOE sim --policy reuse $MIX"
section "9g. Mixtral, without learning" "$SMOE sim --policy reuse --rate 0 $MIX"
section "9h. mid (table 8) without learning" "$SMOE sim --policy reuse --rate 0 $SYN/mid.trace"
section "10. What the best history ranking could hit (ceiling)" \
    "$SMOE sim --ceiling --policy lfu,reuse $GPT $MIX"
section "11. Work per eviction" "$SMOE sim --stats --policy lru,lfu,reuse \
$T/gpt-oss-20b-sorry-bench-base.trace.gz"
section "11b. Work per eviction in the ring (64, 1,024 and 65,536 slots)" "$BENCH_EVICT"

if [ "${SMOE_EVICTION_LIBRARY:-0}" = 1 ]; then
    V=${TMPDIR:-/tmp}
    $SMOE gen --out "$V/evict-gpt-64k.smoe" --layers 24 --experts 32 --blob-bytes 64k --top-k 4 >/dev/null
    $SMOE gen --out "$V/evict-mix-64k.smoe" --layers 32 --experts 8 --blob-bytes 64k --top-k 2 >/dev/null
    for f in $GPT; do
        section "12. The library under lru and reuse: $(basename "$f")" "$SMOE bench \
--vault $V/evict-gpt-64k.smoe --trace $f --tokens 4000 --memory 25% --sweep 10%,25%,50% --no-progress"
    done
    for f in $MIX; do
        section "12. The library under lru and reuse: $(basename "$f")" "$SMOE bench \
--vault $V/evict-mix-64k.smoe --trace $f --memory 25% --sweep 10%,25%,50% --no-progress"
    done
    $SMOE gen --out "$V/evict-gpt-4m.smoe" --layers 24 --experts 32 --blob-bytes 4M --top-k 4 >/dev/null
    section "13. With the page cache, 4 MiB blobs" "$SMOE bench --vault $V/evict-gpt-4m.smoe \
--trace $T/gpt-oss-20b-mmlu-test.trace.gz --tokens 100 --memory 25% --sweep 10%,25%,50% --no-progress"
    rm -f "$V/evict-gpt-64k.smoe" "$V/evict-mix-64k.smoe" "$V/evict-gpt-4m.smoe"
fi
