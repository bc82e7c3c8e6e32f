#!/bin/sh
# benchmarks.sh - rerun the measurements of docs/benchmarks.md.
#
# usage: docs/benchmarks.sh BUILD_DIR WORK_DIR TRACES_DIR [PHASE...]
#   BUILD_DIR   a cmake build of this repository (holds src/tool/smoe)
#   WORK_DIR    where the vaults (6 GiB) and the results go
#   TRACES_DIR  the real routing traces (gpt-oss-20b-*.trace.gz, mixtral8x7b-*.trace)
#   PHASE       vaults read replay workers sweep spec advice summary (default: all)
# Needs root for dropping the page cache and for the memory cgroups, fio and
# jq for the cold-throughput and summary phases, gnuplot for the plot.
set -eu
[ $# -ge 3 ] || { sed -n '3,10p' "$0"; exit 2; }
SMOE=$1/src/tool/smoe
W=$2
T=$3
shift 3
PHASES=${*:-vaults read replay workers sweep spec advice summary}
mkdir -p "$W"
GPT=$W/gpt-oss-20b-shape.smoe
MIX=$W/mixtral-8x7b-shape.smoe
TOKENS=100

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

for phase in $PHASES; do
case $phase in
vaults)
    # Real shapes, blob sizes scaled so each vault is 3 GiB.
    [ -f "$GPT" ] || "$SMOE" gen --out "$GPT" --layers 24 --experts 32 --blob-bytes 4M \
        --top-k 4 --model gpt-oss-20b-shape
    [ -f "$MIX" ] || "$SMOE" gen --out "$MIX" --layers 32 --experts 8 --blob-bytes 12M \
        --top-k 2 --model mixtral-8x7b-shape
    ;;
read)
    # Cold sequential throughput: the library against fio, 5 rounds interleaved.
    for i in 1 2 3 4 5; do
        drop; "$SMOE" read "$GPT" --no-verify --json > "$W/read-noverify-$i.json"
        drop; "$SMOE" read "$GPT" --json > "$W/read-default-$i.json"
        drop; fio --name=uring --filename="$GPT" --readonly --rw=read --bs=4M --direct=1 \
            --ioengine=io_uring --iodepth=16 --size=3G --output-format=json \
            > "$W/fio-uring-$i.json"
        drop; fio --name=psync --filename="$GPT" --readonly --rw=read --bs=4M --direct=1 \
            --ioengine=psync --numjobs=16 --size=192M --offset_increment=192M \
            --group_reporting --output-format=json > "$W/fio-psync-$i.json"
    done
    ;;
replay)
    # Every mode, side by side, at 10% and 25% of the vault.
    for mem in 10 25; do
        for t in gpt-oss-20b-mmlu-test gpt-oss-20b-sorry-bench-base; do
            "$SMOE" bench --vault "$GPT" --trace "$T/$t.trace.gz" --mode all --memory "$mem%" \
                --tokens $TOKENS --no-progress --json "$W/$t-$mem.json" | tee "$W/$t-$mem.txt"
        done
        for t in gsm8k-0 gsm8k-1 humaneval-0 humaneval-1; do
            "$SMOE" bench --vault "$MIX" --trace "$T/mixtral8x7b-$t.trace" --mode all \
                --memory "$mem%" --tokens $TOKENS --no-progress \
                --json "$W/mixtral8x7b-$t-$mem.json" | tee "$W/mixtral8x7b-$t-$mem.txt"
        done
    done
    ;;
workers)
    # Fewer threads on this 2-core machine: the library and pagecache at 4 and 2.
    for n in 4 2; do
        "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" \
            --mode smoe,pagecache --memory 25% --tokens $TOKENS --workers $n --no-progress \
            --json "$W/workers-$n.json" | tee "$W/workers-$n.txt"
    done
    ;;
sweep)
    "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" --mode smoe \
        --memory 25% --tokens 50 --sweep 5%,10%,15%,25%,35%,50%,75% --no-progress \
        --json "$W/sweep.json" --plot "$W/hitrate-gpt-oss-20b-mmlu.png" | tee "$W/sweep.txt"
    ;;
spec)
    # The real traces carry no gate ranks beyond top-k: next-layer speculation.
    for mem in 10 25; do
        "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" --mode smoe \
            --memory $mem% --tokens $TOKENS --spec-next-layer --no-progress \
            --json "$W/spec-next-layer-$mem.json" | tee "$W/spec-next-layer-$mem.txt"
    done
    # With 3 ms of compute per layer for speculation to hide reads behind.
    "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" --mode smoe \
        --memory 10% --tokens $TOKENS --spec-next-layer --compute-us 3000 --no-progress \
        --json "$W/spec-next-layer-compute.json" | tee "$W/spec-next-layer-compute.txt"
    # Gate-rank speculation on a synthetic trace that has ranks 5-12.
    "$SMOE" trace-gen -o "$W/synthetic-spec.trace.gz" --layers 24 --experts 32 --top-k 4 \
        --tokens 1000 --overlap 0.43 --spec 8 --spec-hit 0.5 --seed 1
    "$SMOE" bench --vault "$GPT" --trace "$W/synthetic-spec.trace.gz" --mode smoe \
        --memory 25% --tokens $TOKENS --spec 8 --no-progress \
        --json "$W/spec-ranks.json" | tee "$W/spec-ranks.txt"
    ;;
advice)
    # The page cache at its best: no read-ahead beyond the expert (willneed),
    # and equal cache instead of equal memory (--cache-only).
    "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" \
        --mode smoe,pagecache,mmap --memory 25% --tokens 50 --os-advice willneed \
        --cache-only --no-progress --json "$W/advice-gpt-oss.json" | tee "$W/advice-gpt-oss.txt"
    for t in gsm8k-0 humaneval-1; do
        "$SMOE" bench --vault "$MIX" --trace "$T/mixtral8x7b-$t.trace" --mode smoe,pagecache \
            --memory 25% --tokens $TOKENS --os-advice willneed --cache-only --no-progress \
            --json "$W/advice-mixtral8x7b-$t.json" | tee "$W/advice-mixtral8x7b-$t.txt"
    done
    ;;
summary)
    echo "| trace | memory | smoe wait ms/token | pagecache / smoe | mmap / smoe | direct / smoe | smoe hit | LRU | optimal | pagecache hit |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for f in "$W"/gpt-oss-*-10.json "$W"/gpt-oss-*-25.json "$W"/mixtral8x7b-*-10.json \
             "$W"/mixtral8x7b-*-25.json; do
        [ -f "$f" ] || continue
        jq -r '
          def m(n): (.modes[] | select(.mode == n));
          def r(x): (x * 100 | round / 100 | tostring);
          def h(x): (x * 1000 | round / 1000 | tostring);
          "| \(.trace.path | split("/") | last | sub("\\.trace(\\.gz)?$"; "")) | \(.config.memory_fraction * 100 | round)% | \(m("smoe").wait_us_per_token.mean / 1000 | round) | \(r(m("pagecache").vs_smoe.wait_mean))x | \(r(m("mmap").vs_smoe.wait_mean))x | \(r(m("direct").vs_smoe.wait_mean))x | \(h(m("smoe").hit_rate)) | \(h(.offline.lru_hit_rate)) | \(h(.offline.opt_hit_rate)) | \(h(m("pagecache").hit_rate)) |"' "$f"
    done
    ;;
*)
    echo "unknown phase '$phase'" >&2
    exit 2
    ;;
esac
done
