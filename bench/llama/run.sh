#!/bin/sh
# bench/llama/run.sh BUILD DIR [options]: stock llama.cpp against the
# integration on a synthetic GGUF shaped like a real model, at equal memory
# (docs/llama.cpp.md, "Performance").
#
# BUILD is a build with -DSMOE_BUILD_LLAMA=ON; DIR holds the model and the
# vault (written once, reused). Each mode runs once, cold (the model's and
# the vault's pages dropped from the page cache first), one after the
# other, and prints: load time, time to first token (from process start,
# load included), decode tokens/s, peak memory of its cgroup.
#
#   stock-mmap     smoe-llama --resident: stock llama.cpp, its default mmap
#   stock-cpu-moe  the same with the experts placed on the CPU (--cpu-moe);
#                  without a GPU this is the same placement as stock-mmap
#   smoe           the integration, ring sized so that ring + staging +
#                  dense weights fit the same limit; experts copied from
#                  the ring into the staging pages
#   smoe-map       the same ring, experts' ring pages mapped over their
#                  slices where those are page aligned (--map, zero-copy;
#                  copied where not): the cost of a hit, side by side with
#                  smoe
#   smoe-la        smoe with the router lookahead (--lookahead): layer L+1's
#                  router applied at layer L's routing, its top-k hinted;
#                  with smoe side by side, the lookahead's cost and gain
#   smoe-map-la    smoe-map with the lookahead
#   ceiling        stock llama.cpp with no memory limit and the model in the
#                  page cache (read once before; the only warm mode)
#   bench-stock    stock llama-completion --no-repack, mmap: the experts
#                  read from the mapping (llama-bench repacks Q4_K experts
#                  into anonymous memory, which the limit cannot hold)
#   bench-plugin   stock llama-bench with libggml-smoe.so (-ot exps=SMOE),
#                  ring of SHARE% of the experts (no staging), SMOE_STATS
#   bench-plugin-full  the same with the whole vault in the ring (no limit)
#   bench-ceiling  stock llama-bench, no limit, model in the page cache (warm),
#                  its defaults (Q4_K experts repacked)
#   bench-ceiling-cpu  bench-stock with no limit, warm (plain kernels, as
#                  the plugin's)
#   bench-plugin-decode  bench-plugin with no prompt (llama-bench -p 0):
#                  TOKENS decoded one at a time, the workload of the Belady
#                  bound below
#   server-stock   stock llama-server --no-repack (mmap), in the cgroup: one
#                  /completion of PROMPT letters and TOKENS generated, through
#                  its HTTP API (server_bench.py); its own timings
#   server-plugin  llama-server with libggml-smoe.so, ring of SHARE%, cgroup
#   server-ceiling stock llama-server --no-repack, no limit, warm
# The other bench-* modes run llama-bench -p PROMPT -n TOKENS -r 1 --no-warmup;
# bench-stock and bench-ceiling-cpu need a model written with mkmoe.py
# --byte-vocab (their prompt is PROMPT letters, a byte a token). All print:
# prompt t/s and the prompt's time (its first token, load excluded), decode
# t/s; below a plugin row, its SMOE_STATS (plugin_stats.py): the counters,
# and a hit's own cost (hit_ns / hit_claims: its prefetch, claim and
# release, no read) times the experts a decoded token claims (top-k x MoE
# layers), as a share of a decoded token's time.
# --repeat R runs the whole list of modes R times, interleaved, and prints
# the median and range of each mode's decode and prompt rates at the end.
# The modes with a limit run in a memory cgroup (v1 or v2; needs root) limited to
# the dense weights + SHARE% of the experts + OVERHEAD_MIB for llama.cpp's
# own buffers.
#
# bench-plugin-decode prints Belady's bound (plugin_stats.py): `smoe sim`
# on the routing the run demand-prefetched (recorded by the library,
# SMOE_TRACE), at its ring, gives the optimum's misses; times the blob
# size and divided by the disk's rate (`smoe read` of the vault, cold, at
# the start of the run) that is the disk time the optimum still needs,
# beside the plugin's miss_wait_ns.
#
# Options:
#   --shape S       qwen3-30b-a3b (default; Q4_K experts) or gpt-oss-20b (MXFP4)
#   --layers N      layers (default 12; the real models have 48 and 24)
#   --share P       experts' share of the memory limit, percent (default 25)
#   --prompt N      prompt tokens (default 16); --tokens N generated (default 32)
#   --threads N     CPU threads (default 2)
#   --replay TRACE  measurement only: smoe-llama's modes (--replay-trace) and
#                   the plugin's (SMOE_REPLAY) route by this recorded trace
#                   (docs/trace-format.md; .gz is decompressed into DIR, its
#                   first MoE-layers layers kept) instead of by the random
#                   router; stock programs cannot replay (their rows route by
#                   the model's router); smoe bench then replays the same
#                   tokens of it against the vault at the same ring size, for
#                   its hit rate beside the integration's. Its layers must be
#                   at least the model's, its top-k and experts the model's.
#   --modes LIST    comma list of the modes above (default: stock-mmap,
#                   stock-cpu-moe,smoe,smoe-map,ceiling)
#   --overhead MIB  llama.cpp's own memory in the limit (default 384)
#   --repeat R      rounds of the whole mode list (default 1)
# Every mode runs with OMP_WAIT_POLICY=passive (smoe-llama sets it itself
# when streaming): on a shared machine, spinning OpenMP workers of the stock
# runs would otherwise compete with everything else for the cores.
set -eu
export OMP_WAIT_POLICY=passive
[ $# -ge 2 ] || { sed -n '2,88p' "$0"; exit 2; }
build=$(cd "$1" && pwd)
dir=$2
shift 2
shape=qwen3-30b-a3b layers=12 share=25 prompt=16 tokens=32 threads=2 replay= overhead=384 repeat=1
modes=stock-mmap,stock-cpu-moe,smoe,smoe-map,ceiling
while [ $# -gt 0 ]; do
    case $1 in
    --shape) shape=$2 ;; --layers) layers=$2 ;; --share) share=$2 ;;
    --prompt) prompt=$2 ;; --tokens) tokens=$2 ;; --threads) threads=$2 ;;
    --replay) replay=$2 ;; --modes) modes=$2 ;; --overhead) overhead=$2 ;;
    --repeat) repeat=$2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
here=$(cd "$(dirname "$0")" && pwd)
llama=$build/integrations/llama.cpp/smoe-llama
smoe=$build/tools/smoe/smoe
lcpp=$(sed -n 's/^SMOE_LLAMA_CPP_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -x "$llama" ] && [ -x "$smoe" ] || { echo "run.sh: build smoe-llama and smoe in $build" >&2; exit 1; }
mkdir -p "$dir"
model=$dir/$shape-$layers.gguf
vault=$dir/$shape-$layers.smoe
log() { echo "== $(date +%H:%M:%S) $*" >&2; }

if [ ! -f "$model" ]; then
    log "writing $model"
    PYTHONPATH=$lcpp/gguf-py /usr/bin/python3 "$here/../../integrations/llama.cpp/tests/mkmoe.py" \
        "$shape" "$model.tmp" --layers "$layers"
    mv "$model.tmp" "$model"
fi
if [ ! -f "$vault" ]; then
    log "packing $vault"
    "$smoe" pack --quiet --out "$vault" "$model" > /dev/null
fi
info=$("$smoe" inspect "$vault")
entries=$(echo "$info" | sed -n 's/^entries *\([0-9]*\).*/\1/p')
payload=$(echo "$info" | sed -n 's/^blob bytes *\([0-9]*\) payload.*/\1/p')
slot=$(echo "$info" | sed -n 's/.*largest padded \([0-9]*\).*/\1/p')
msize=$(stat -c %s "$model")
dense=$((msize - payload))
# The integration's staging: one layer of experts (entries / MoE layers).
moe_layers=$(echo "$info" | sed -n 's/^layers *\([0-9]*\)$/\1/p')
stage=$((payload / moe_layers))
limit=$((dense + payload * share / 100 + overhead * 1048576))
slots=$(( (payload * share / 100 - stage) / slot ))
pslots=$(( payload * share / 100 / slot ))   # the plugin's ring: no staging
lbench=$build/bin/llama-bench
lcompl=$build/bin/llama-completion
lserver=$build/bin/llama-server
ptext=$(awk -v n="$prompt" 'BEGIN { for (i = 0; i < n; i++) printf "%c", i % 8 == 7 ? 32 : 97 + (i * 7) % 26 }')
plugin=$build/integrations/llama.cpp/libggml-smoe.so
case ,$modes, in *,smoe*) [ "$slots" -ge 1 ] || { echo "run.sh: no room for a ring beside the staging memory" >&2; exit 1; } ;; esac

ptoks=$(awk -v n="$prompt" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", (i * 7919 + 13) % 30000 }')
topk=$(echo "$info" | sed -n 's/^top_k *\([0-9]*\)$/\1/p')
experts=$(echo "$info" | sed -n 's/^experts *\([0-9]*\) per layer$/\1/p')
rflag= penv=
if [ -n "$replay" ]; then
    # The trace's first $moe_layers layers, its header saying so: the
    # plugin, smoe-llama and `smoe sim` then see the same routing.
    rt=$dir/replay-$moe_layers.trace
    case $replay in *.gz) rcat="gzip -dc" ;; *) rcat=cat ;; esac
    $rcat "$replay" | awk -v L="$moe_layers" '/^#/ { sub(/ layers=[0-9]+/, " layers=" L); print; next } $2 < L' > "$rt"
    set -- $($rcat "$replay" | sed -n 's/^#.* layers=\([0-9]*\).* experts=\([0-9]*\).* topk=\([0-9]*\).*/\1 \2 \3/p' | head -1) 0 0 0
    [ "$1" -ge "$moe_layers" ] && [ "$2" = "$experts" ] && [ "$3" = "$topk" ] || {
        echo "run.sh: --replay $replay: the trace's layers=$1 experts=$2 topk=$3 do not fit the" \
            "model's $moe_layers MoE layers of $experts experts, top-$topk" >&2; exit 1; }
    replay=$rt
    rflag="--replay-trace $replay"
    penv="SMOE_REPLAY=$replay"
fi

cg_base=
cgroup_make() { # limit -> prints the cgroup's directory
    if grep -q '^0::' /proc/self/cgroup && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        d=/sys/fs/cgroup/smoe-llama-bench-$$
        mkdir "$d" && echo "$1" > "$d/memory.max" && echo 0 > "$d/memory.swap.max" 2>/dev/null || true
    else
        base=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
        d=/sys/fs/cgroup/memory$base/smoe-llama-bench-$$
        mkdir "$d" && echo "$1" > "$d/memory.limit_in_bytes"
    fi
    echo "$d"
}
cgroup_peak() {
    cat "$1/memory.peak" 2>/dev/null || cat "$1/memory.max_usage_in_bytes"
}
drop() { for f in "$model" "$vault"; do dd if="$f" iflag=nocache count=0 status=none; done; }

log "$shape, $layers layers: model $msize bytes (dense $dense, experts $payload in $entries blobs" \
    "of up to $slot); limit $limit bytes (dense + $share% of experts + $overhead MiB);" \
    "smoe ring $slots slots + staging $stage; load $(cut -d' ' -f1-3 /proc/loadavg)"
results=$dir/results.txt
: > "$results"
# bench_mode MODE: one llama-bench run of a bench-* mode; prints its row and
# appends "MODE decode_t/s prompt_t/s" to $results.
bench_mode() {
    m=$1 env= lim=- cg=
    json=$dir/stats-$m.json
    rm -f "$json"
    case $m in
    bench-plugin|server-plugin) env="GGML_BACKEND_PATH=$plugin SMOE_VAULT=$vault SMOE_RING_SLOTS=$pslots SMOE_STATS=$json $penv" ;;
    bench-plugin-decode) rm -f "$dir/rec-$m.trace"
        env="GGML_BACKEND_PATH=$plugin SMOE_VAULT=$vault SMOE_RING_SLOTS=$pslots SMOE_STATS=$json $penv SMOE_TRACE=$dir/rec-$m.trace" ;;
    bench-plugin-full) env="GGML_BACKEND_PATH=$plugin SMOE_VAULT=$vault SMOE_RING_SLOTS=$entries SMOE_STATS=$json $penv" ;;
    esac
    ot=
    [ -n "$env" ] && ot="-ot exps=SMOE"
    # Stock's experts in the CPU's plain buffer type, served from the
    # mapping (as --cpu-moe places them): by default llama-bench copies
    # Q4_K experts into repacked anonymous buffers, which a limit of 25%
    # of the experts cannot hold (the OOM killer ends it).
    # llama-bench cannot turn repacking off (-ot exps=CPU still gives
    # CPU_REPACK), so these two run llama-completion --no-repack: experts
    # read from the mapping, stock's plain kernels, as the plugin's. The
    # prompt is PROMPT letters (a --byte-vocab model: a byte is a token).
    cmd="$lbench -m $model -t $threads -p $prompt -n $tokens -r 1 --no-warmup -o jsonl"
    case $m in
    bench-stock|bench-ceiling-cpu)
        cmd="$lcompl -m $model -t $threads -n $tokens --ignore-eos --no-repack --no-warmup -no-cnv" ;;
    bench-plugin-decode)
        cmd="$lbench -m $model -t $threads -p 0 -n $tokens -r 1 --no-warmup -o jsonl" ;;
    server-*)
        cmd="$lserver -m $model -t $threads -c $((prompt + tokens + 64)) -np 1 --no-repack --no-warmup" ;;
    esac
    drop
    case $m in bench-ceiling*|server-ceiling) cat "$model" > /dev/null ;; esac
    out=$dir/run-$m.out
    rc=0
    lcompl_p= srv=
    case $cmd in "$lcompl"*) lcompl_p=1 ;; "$lserver"*) srv=server ;; esac
    case $m in
    server-stock|server-plugin)
        cg=$(cgroup_make "$limit")
        lim=$((limit / 1048576))
        env $env /usr/bin/python3 "$here/server_bench.py" --cgroup "$cg" "$ptext" "$tokens" \
            $cmd $ot > "$out" 2> "$out.err" < /dev/null || rc=$? ;;
    server-*)
        env $env /usr/bin/python3 "$here/server_bench.py" "$ptext" "$tokens" \
            $cmd $ot > "$out" 2> "$out.err" < /dev/null || rc=$? ;;
    bench-stock|bench-plugin|bench-plugin-decode)
        cg=$(cgroup_make "$limit")
        lim=$((limit / 1048576))
        sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
            env $env $cmd $ot ${lcompl_p:+-p "$ptext"} > "$out" 2> "$out.err" < /dev/null || rc=$? ;;
    *)
        env $env $cmd $ot ${lcompl_p:+-p "$ptext"} > "$out" 2> "$out.err" < /dev/null || rc=$? ;;
    esac
    peak=-
    if [ -n "$cg" ]; then peak=$(( $(cgroup_peak "$cg") / 1048576 )); rmdir "$cg"; fi
    [ "$rc" = 0 ] || { cat "$out.err"; echo "run.sh: $m failed ($rc)" >&2; exit 1; }
    set -- $(/usr/bin/python3 -c '
import json, re, sys
pp = tg = 0.0
n = int(sys.argv[2])
if sys.argv[3] == "server":
    tg, pp, ms, _ = open(sys.argv[1]).read().split()
    tg, pp = float(tg), float(pp)
elif sys.argv[3]:
    for l in open(sys.argv[1] + ".err"):
        r = re.search(r"(prompt eval|\seval) time = *([0-9.]+) ms / *([0-9]+) (tokens|runs)", l)
        if r and r.group(1) == "prompt eval" and float(r.group(2)) > 0: pp = int(r.group(3)) / float(r.group(2)) * 1e3; n = int(r.group(3))
        elif r and float(r.group(2)) > 0: tg = int(r.group(3)) / float(r.group(2)) * 1e3
else:
    for l in open(sys.argv[1]):
        r = json.loads(l)
        if r["n_gen"] > 0: tg = r["avg_ts"]
        else: pp = r["avg_ts"]
print("%.2f %.2f %.3f" % (tg, pp, n / pp if pp else 0))' "$out" "$prompt" "${lcompl_p:-$srv}")
    tps=$1 pps=$2 pt=$3
    hr=-
    [ -f "$json" ] && hr=$(/usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["hit_rate"])' "$json")
    printf '%-17s %9s %9s %9s %11s %10s %8s\n' "$m" "$lim" "$pps" "$pt" "$tps" "$peak" "$hr"
    echo "$m $tps $pps" >> "$results"
    bel=
    [ "$m" = bench-plugin-decode ] &&
        bel="--belady $smoe $dir/rec-$m.trace $pslots $((payload / entries)) $disk_gbps"
    [ -f "$json" ] && /usr/bin/python3 "$here/plugin_stats.py" "$json" "$m" "$prompt" "$tokens" \
        "$tps" "$topk" "$moe_layers" $bel
    true
}

# The disk's rate for the vault, cold, through the library (Belady's bound).
drop
disk=$("$smoe" read "$vault" 2>&1 | tail -n 2)
disk_gbps=$(echo "$disk" | sed -n 's/.* \([0-9.]*\) GB\/s.*/\1/p' | head -1)
log "disk: the vault streamed once through the library, cold"
echo "$disk" | sed 's/^/    /'
printf '%-17s %9s %9s %9s %11s %10s %8s\n' bench-mode limit_MiB pp_t/s prompt_s decode_t/s peak_MiB hit_rate
for round in $(seq "$repeat"); do
log "round $round of $repeat; load $(cut -d' ' -f1-3 /proc/loadavg)"
stock_tps=
for mode in $(echo "$modes" | tr ',' ' '); do
    case $mode in bench-*|server-*) bench_mode "$mode"; continue ;; esac
    case $mode in
    stock-mmap) args="--resident" ;;
    stock-cpu-moe) args="--resident --cpu-moe" ;;
    smoe) args="--vault $vault --ring-slots $slots --stats" ;;
    smoe-map) args="--vault $vault --ring-slots $slots --stats --map" ;;
    smoe-la) args="--vault $vault --ring-slots $slots --stats --lookahead" ;;
    smoe-map-la) args="--vault $vault --ring-slots $slots --stats --map --lookahead" ;;
    ceiling) args="--resident" ;;
    *) echo "run.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
    drop
    [ "$mode" = ceiling ] && cat "$model" > /dev/null
    out=$dir/run-$mode.err
    if [ "$mode" = ceiling ]; then
        lim=-
        "$llama" --model "$model" --prompt-tokens "$ptoks" --n-predict "$tokens" --ignore-eos \
            --threads "$threads" $rflag $args > /dev/null 2> "$out" || { cat "$out"; exit 1; }
        peak=-
    else
        cg=$(cgroup_make "$limit")
        lim=$((limit / 1048576))
        rc=0
        sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
            "$llama" --model "$model" --prompt-tokens "$ptoks" --n-predict "$tokens" \
            --ignore-eos --threads "$threads" $rflag $args > /dev/null 2> "$out" || rc=$?
        peak=$(( $(cgroup_peak "$cg") / 1048576 ))
        rmdir "$cg"
        [ "$rc" = 0 ] || { cat "$out"; echo "run.sh: $mode failed ($rc)" >&2; exit 1; }
    fi
    line=$(grep 'load .* s, prompt' "$out")
    load=$(echo "$line" | sed -n 's/.*load \([0-9.]*\) s.*/\1/p')
    ttft=$(echo "$line" | sed -n 's/.*first token \([0-9.]*\) s.*/\1/p')
    tps=$(echo "$line" | sed -n 's/.*decode \([0-9.]*\) tokens.*/\1/p')
    hr=$(sed -n 's/.*hit rate \([0-9.]*\).*/\1/p' "$out")
    [ "$mode" = stock-mmap ] && stock_tps=$tps
    ratio=$(awk -v a="$tps" -v b="${stock_tps:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }')
    printf '%-14s %10s %8s %9s %11s %9s %10s %9s\n' "$mode" "$lim" "$load" "$ttft" "$tps" "$ratio" "$peak" "${hr:--}"
    case $mode in smoe*)
        grep 'smoe-llama: ' "$out" | grep -v 'load .* s, prompt' | sed 's/^/    /'
        # What a hit costs: copying, or mapping (and unmapping on release),
        # an expert; per expert, and as a share of the generation's time
        # (prompt and decode: first token - load + tokens / decode rate).
        awk -v tps="$tps" -v n="$tokens" -v load="$load" -v ttft="$ttft" '/experts present/ {
            for (i = 1; i <= NF; i++) {
                if ($(i+1) == "experts" && $(i+2) == "present,") e = $i
                if ($i == "copied") cs = $(i+4)
                if ($i == "mapped" && $(i+3) == "in") ms = $(i+4)
            }
            gen = ttft - load + (tps > 0 ? n / tps : 0)
            if (e > 0 && gen > 0)
                printf "    hit cost: %.1f us an expert (copy %.3f s + map %.3f s, %d experts), %.1f%% of the %.2f s of generation\n", (cs + ms) * 1e6 / e, cs, ms, e, (cs + ms) / gen * 100, gen
        }' "$out"
        # The lookahead's own time per decoded token: its time a routing
        # times the routings a token makes hints at (MoE layers - 1), and
        # that as a share of a decoded token's time.
        awk -v tps="$tps" -v nl="$moe_layers" '/lookahead_hints/ {
            us = ""
            for (i = 1; i <= NF; i++)
                if (us == "" && $(i+1) == "us" && $(i+2) == "a" && $(i+3) ~ /^routing/) us = $i
            tok = (tps > 0) ? 1e6 / tps : 0
            share = (tok > 0) ? us * (nl - 1) / tok * 100 : 0
            printf "    lookahead cost: %.1f us a routing, %.1f us a decoded token (%d routings), %.2f%% of a decoded token\n", us, us * (nl - 1), nl - 1, share
        }' "$out" ;;
    esac
    echo "$mode $tps -" >> "$results"
done
done
if [ "$repeat" -gt 1 ]; then
    log "medians over $repeat rounds (min..max); ratios of medians"
    /usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for l in open(sys.argv[1]):
    m, d, p = l.split()
    rows.setdefault(m, []).append((float(d), None if p == "-" else float(p)))
def med(m, i):
    v = [r[i] for r in rows.get(m, []) if r[i] is not None]
    return (statistics.median(v), min(v), max(v)) if v else None
st, ce = med("bench-stock", 0), med("bench-ceiling", 0)
print("%-17s %22s %22s %9s %9s" % ("mode", "decode t/s", "prompt t/s", "vs stock", "vs ceil"))
for m in rows:
    d, p = med(m, 0), med(m, 1)
    ps = "%.2f (%.2f..%.2f)" % p if p else "-"
    print("%-17s %22s %22s %9s %9s" % (m, "%.2f (%.2f..%.2f)" % d, ps,
          "%.2fx" % (d[0] / st[0]) if st else "-", "%.2fx" % (d[0] / ce[0]) if ce else "-"))
PY
fi

if [ -n "$replay" ] && echo "$modes" | grep -q smoe; then
    n=$((prompt + tokens))
    log "smoe bench on the same $n tokens of the trace, ring of $slots slots"
    "$smoe" bench --vault "$vault" --trace "$replay" --mode smoe,mmap --tokens "$n" \
        --memory $((slots * slot)) --no-progress 2>&1 | sed 's/^/    /'
fi
