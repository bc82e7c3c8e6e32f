#!/bin/sh
# benchmarks.sh - rerun the measurements of docs/benchmarks.md.
#
# usage: bench/benchmarks.sh BUILD_DIR WORK_DIR TRACES_DIR [PHASE...]
#   BUILD_DIR   a cmake build of this repository (holds tools/smoe/smoe)
#   WORK_DIR    where the vaults (6 GiB) and the results go
#   TRACES_DIR  the real routing traces (gpt-oss-20b-*.trace.gz, mixtral8x7b-*.trace)
#   PHASE       vaults read replay workers sweep spec advice chunks chunk-spec
#               summary chunk-summary prewarm (default: all)
# Needs root for dropping the page cache and for the memory cgroups, fio and
# jq for the cold-throughput and summary phases, gnuplot for the plot.
set -eu
[ $# -ge 3 ] || { sed -n '3,10p' "$0"; exit 2; }
SMOE=$1/tools/smoe/smoe
W=$2
T=$3
shift 3
PHASES=${*:-vaults read replay workers sweep spec advice chunks chunk-spec summary chunk-summary prewarm}
mkdir -p "$W"
GPT=$W/gpt-oss-20b-shape.smoe
MIX=$W/mixtral-8x7b-shape.smoe
G8=$W/gpt-oss-20b-8m.smoe
HERE=$(cd "$(dirname "$0")" && pwd)
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
    # Cold sequential throughput: the warm-up (smoe read --order shares),
    # verification off and on, and blob order, against fio psync with a job
    # per worker and the blob as block size, paired rounds; fio's buffers on
    # 2 MiB pages as the ring's are (bench/bench_read.sh). Vaults of 2 MiB
    # blobs (1 GiB) and 4 MiB blobs (3 GiB).
    R2=$W/read-2m.smoe
    [ -f "$R2" ] || "$SMOE" gen --out "$R2" --layers 16 --experts 32 --blob-bytes 2M
    { ROUNDS=3 sh "$HERE/bench_read.sh" "$SMOE" "$R2" 1 4 16
      ROUNDS=3 sh "$HERE/bench_read.sh" "$SMOE" "$GPT" 1 4 16; } | tee "$W/read.txt"
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
prewarm)
    # The first token's wait with pre-warm, at 25% and 50% of the vault: a
    # cold run (no histogram yet; it saves one at close), then a warm run
    # pre-warmed from it during 2 s of idle time; a control pair without
    # pre-warm. Three rounds each.
    for mem in 25 50; do
        for round in 1 2 3; do
            for pair in prewarm control; do
                rm -f "$GPT.freq"
                warm=--prewarm
                [ $pair = prewarm ] || warm=
                for run in cold warm; do
                    opt=
                    [ $run = cold ] || opt=$warm
                    "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" \
                        --mode smoe --memory $mem% --tokens 200 --freq $opt --idle-ms 2000 \
                        --no-progress --json "$W/prewarm-$mem-$round-$pair-$run.json" |
                        tee "$W/prewarm-$mem-$round-$pair-$run.txt"
                done
            done
        done
    done
    # Pre-warm without idle time: the replay starts at once.
    "$SMOE" bench --vault "$GPT" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" --mode smoe \
        --memory 25% --tokens 200 --freq --prewarm --no-progress \
        --json "$W/prewarm-no-idle.json" | tee "$W/prewarm-no-idle.txt"
    rm -f "$GPT.freq"
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
chunks)
    # Chunked against whole-blob reads on 8 MiB blobs: time to READY of
    # demand loads and wait per token, at 1, 4 and 16 workers, 3 rounds;
    # then next-layer speculation on and off at each chunk setting.
    [ -f "$G8" ] || "$SMOE" gen --out "$G8" --layers 24 --experts 32 --blob-bytes 8M \
        --top-k 4 --model gpt-oss-20b-8m
    for r in 1 2 3; do
        for w in 1 4 16; do
            for c in 1M 2M 4M 8M; do
                "$SMOE" bench --vault "$G8" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" \
                    --mode smoe --memory 25% --tokens 40 --workers $w --chunk $c --no-progress \
                    --json "$W/chunk-w$w-c$c-r$r.json" > /dev/null
            done
        done
    done
    ;;
chunk-spec)
    # Next-layer speculation on and off at 10%: whole 8 MiB reads, 2 MiB
    # chunks, and the library's defaults (4 MiB demand, 512 KiB speculative
    # chunks), 3 rounds.
    [ -f "$G8" ] || "$SMOE" gen --out "$G8" --layers 24 --experts 32 --blob-bytes 8M \
        --top-k 4 --model gpt-oss-20b-8m
    for r in 1 2 3; do
        for c in 2M 8M default; do
            chunk="--chunk $c"
            [ $c = default ] && chunk=""
            # shellcheck disable=SC2086
            "$SMOE" bench --vault "$G8" --trace "$T/gpt-oss-20b-mmlu-test.trace.gz" \
                --mode smoe --memory 10% --tokens 40 $chunk --spec-next-layer \
                --no-progress --json "$W/chunk-spec-c$c-r$r.json" > /dev/null
        done
    done
    ;;
chunk-summary)
    echo "| workers | chunk | demand READY p50 ms | p99 ms | wait ms/token (median of 3) |"
    echo "|---|---|---|---|---|"
    for w in 1 4 16; do
        for c in 1M 2M 4M 8M; do
            jq -s -r --arg w $w --arg c $c '
              def med(f): (map(f) | sort | .[length / 2 | floor]);
              map(.modes[] | select(.mode == "smoe")) |
              "| \($w) | \($c) | \(med(.library.ready_demand_p50_ns) / 1e6 * 100 | round / 100) | \(med(.library.ready_demand_p99_ns) / 1e6 * 100 | round / 100) | \(med(.wait_us_per_token.mean) / 1000 | round) |"' \
              "$W"/chunk-w$w-c$c-r*.json
        done
    done
    echo
    echo "| chunk | wait ms/token, spec off | spec on | change | coverage off | on | demand READY p50 off / on ms |"
    echo "|---|---|---|---|---|---|---|"
    for c in 2M 8M default; do
        jq -s -r --arg c $c '
          def med(f): (map(f) | sort | .[length / 2 | floor]);
          (map(.modes[] | select(.mode == "smoe"))) as $off |
          (map(.modes[] | select(.mode == "smoe+spec"))) as $on |
          ($off | med(.wait_us_per_token.mean)) as $a | ($on | med(.wait_us_per_token.mean)) as $b |
          "| \($c) | \($a / 1000 | round) | \($b / 1000 | round) | \((($b / $a - 1) * 1000 | round) / 10)% | \($off | med((.hits + .joins) / .requests) * 1000 | round / 1000) | \($on | med((.hits + .joins) / .requests) * 1000 | round / 1000) | \($off | med(.library.ready_demand_p50_ns) / 1e6 * 100 | round / 100) / \($on | med(.library.ready_demand_p50_ns) / 1e6 * 100 | round / 100) |"' \
          "$W"/chunk-spec-c$c-r*.json
    done
    ;;
summary)
    echo "| trace | memory | smoe wait ms/token | pagecache / smoe | mmap / smoe | direct / smoe | smoe hit | LRU | reuse | optimal | pagecache hit |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for f in "$W"/gpt-oss-*-10.json "$W"/gpt-oss-*-25.json "$W"/mixtral8x7b-*-10.json \
             "$W"/mixtral8x7b-*-25.json; do
        [ -f "$f" ] || continue
        jq -r '
          def m(n): (.modes[] | select(.mode == n));
          def r(x): (x * 100 | round / 100 | tostring);
          def h(x): (x * 1000 | round / 1000 | tostring);
          "| \(.trace.path | split("/") | last | sub("\\.trace(\\.gz)?$"; "")) | \(.config.memory_fraction * 100 | round)% | \(m("smoe").wait_us_per_token.mean / 1000 | round) | \(r(m("pagecache").vs_smoe.wait_mean))x | \(r(m("mmap").vs_smoe.wait_mean))x | \(r(m("direct").vs_smoe.wait_mean))x | \(h(m("smoe").hit_rate)) | \(h(.offline.lru_hit_rate)) | \(h(.offline.reuse_hit_rate)) | \(h(.offline.opt_hit_rate)) | \(h(m("pagecache").hit_rate)) |"' "$f"
    done
    ;;
*)
    echo "unknown phase '$phase'" >&2
    exit 2
    ;;
esac
done
