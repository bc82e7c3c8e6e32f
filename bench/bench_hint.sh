#!/bin/sh
# bench/bench_hint.sh - the figures of docs/benchmarks.md, "Hinted
# speculation": smoe against smoe+recall=R (R = 1, the perfect-predictor
# bound; 0.75; 0.45) on gpt-oss-20b and Mixtral traces, 4 MiB blobs, 2 ms
# of compute per layer, at 25% and 10% of the experts. One JSON per
# (trace, memory) in OUT; bench/bench_hint_table.py summarises them.
#
# Usage: bench/bench_hint.sh SMOE TRACES VAULTS OUT
#   SMOE    the smoe binary
#   TRACES  the folder of the real traces (docs/benchmarks.md)
#   VAULTS  where gptoss.smoe and mixtral4m.smoe are (made if absent:
#           smoe gen, 4 MiB blobs, 3 GiB and 1 GiB)
set -eu
smoe=$1 traces=$2 vaults=$3 out=$4
mkdir -p "$out"
[ -f "$vaults/gptoss.smoe" ] || "$smoe" gen --out "$vaults/gptoss.smoe" --layers 24 \
    --experts 32 --blob-bytes 4M --top-k 4 --model gpt-oss-20b-shape
[ -f "$vaults/mixtral4m.smoe" ] || "$smoe" gen --out "$vaults/mixtral4m.smoe" --layers 32 \
    --experts 8 --blob-bytes 4M --top-k 2 --model mixtral-8x7b-shape
run() { # vault trace name memory [options]
    v=$1 t=$2 n=$3 m=$4
    shift 4
    "$smoe" bench --vault "$vaults/$v" --trace "$traces/$t" --memory "$m" \
        --compute-us 2000 --spec-recall 1,0.75,0.45 --no-progress \
        --json "$out/$n-$m.json" "$@" > "$out/$n-$m.txt"
}
for m in 25% 10%; do
    run gptoss.smoe gpt-oss-20b-mmlu-test.trace.gz gptoss-mmlu "$m" --tokens 150
    run gptoss.smoe gpt-oss-20b-sorry-bench-base.trace.gz gptoss-sorry "$m" --tokens 150
    run mixtral4m.smoe mixtral8x7b-humaneval-1.trace mixtral-humaneval1 "$m"
    run mixtral4m.smoe mixtral8x7b-gsm8k-0.trace mixtral-gsm8k0 "$m"
done
