#!/bin/sh
# bench/llama/gpu_run.sh STEP: the llama.cpp integration with the dense part
# on an NVIDIA GPU (CUDA), against stock llama.cpp on the same machine
# (docs/llama.cpp.md, "The dense part on a GPU"). Self-contained: the GPU
# machine needs no network, only this checkout and build-gpu-carry/.
#
#   pack   (here, where llama.cpp was fetched) write build-gpu-carry/: the
#          tested llama.cpp tree without its .git, models, docs, tools,
#          examples and tests (llama.cpp.tar.xz), the system's xxhash.h,
#          and the smoe tool built in BUILD (default build-llama) with the
#          shared libraries it needs beyond libc and zlib
#   build  (GPU machine) unpack llama.cpp into build-gpu/, configure it with
#          -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 (Hopper: H100, H200)
#          and build only smoe-llama (llama, ggml, ggml-cuda, the
#          integration); incremental: run it again to resume
#   run    (GPU machine) write a synthetic GGUF shaped like Qwen3-30B-A3B
#          (LAYERS layers, default 24; 128 experts of 2048 x 768 Q4_K, top-8),
#          pack it, and run, one after the other, 16 prompt tokens and
#          TOKENS (default 32) greedy ones, every layer's dense part on the
#          GPU (--n-gpu-layers 99):
#            stock-cpu-moe  stock llama.cpp, experts on the CPU (--cpu-moe),
#                           the GGUF in the page cache
#            smoe           the integration, ring 25% of the experts (copy)
#            smoe-map       the same with --map (ring pages mapped)
#            smoe-la        smoe with --lookahead (layer L+1's router on layer
#                           L's hidden state, read off the GPU, as hints)
#            stock-gpu      stock llama.cpp with everything on the GPU (the
#                           ceiling of a GPU that holds the whole model)
#          then the fusion control: stock-cpu-moe and smoe again with
#          GGML_CUDA_DISABLE_FUSION=1 (*-nofuse, compared with each other):
#          the integration's eval callback splits the graph at the router,
#          so CUDA cannot fuse the router's kernels there while stock does,
#          and greedy tokens may part after a near tie; without fusion on
#          either side they must be identical
#          and prints load, first token and decode tokens/s of each, and
#          whether the streamed runs' logits and tokens equal stock-cpu-moe's
#          (the same placement, so they must be bit-identical)
#   plugin (GPU machine) the plugin in stock llama-completion with the dense
#          part on the GPU: the same shape with a byte-level vocabulary
#          (LAYERS layers), packed; one PROMPT-letter prompt (default 128)
#          and TOKENS greedy tokens each, --n-gpu-layers 99, in this order:
#            stock-cpu-moe     stock llama-completion --cpu-moe, the GGUF in
#                              the page cache (its default: CPU repacking)
#            stock-cpu-moe-nr  the same with --no-repack: the plain CPU
#                              kernels the plugin computes with (the
#                              reference for the tokens)
#            plugin            GGML_BACKEND_PATH=libggml-smoe.so
#                              -ot exps=SMOE, ring SHARE% of the experts,
#                              the vault cold
#            plugin-full       the same with the whole vault in the ring
#            stock-gpu         stock with everything on the GPU (ceiling)
#          and prints load, prompt and decode tokens/s, whether the text
#          equals stock-cpu-moe-nr's, and the plugin's SMOE_STATS; then
#          stock llama-bench (-p BENCH_PROMPT -n TOKENS -r 2, default 512,
#          its warm-up run first) for steady rates:
#            bench-stock-cpu-moe  --n-cpu-moe 99 (repacked), page cache warm
#            bench-plugin-full    the plugin, whole vault (the warm-up's
#                                 prompt has filled the ring)
#            bench-plugin         the plugin, SHARE% ring, vault cold
#            bench-stock-gpu      everything on the GPU
#   model  (GPU machine) only write and pack the plugin step's model (it
#          can run beside build once llama.cpp is unpacked)
#   all    build, then run
# Environment: LAYERS, TOKENS, PROMPT, THREADS (default: the CPU count), GPU_LAYERS
# (default 99), SHARE (ring, % of the experts; default 25), BUILD (pack),
# BUILD_TARGETS (build: the targets; default smoe-llama ggml-smoe
# llama-completion llama-bench), BENCH=0 (plugin: no llama-bench part),
# CUDA_FA=OFF (build: without CUDA's flash-attention kernels, a shorter
# build; every mode then runs without flash attention),
# CONFIGURE_ONLY=1 (build: stop after configuring, on a machine without GPU).
set -eu
cd "$(dirname "$0")/../.."
root=$PWD
carry=$root/build-gpu-carry
work=$root/build-gpu
step=${1:-}
log() { echo "== $(date +%H:%M:%S) $*" >&2; }

do_pack() {
    b=${BUILD:-build-llama}
    lcpp=$(sed -n 's/^SMOE_LLAMA_CPP_DIR:[A-Z]*=//p' "$b/CMakeCache.txt")
    [ -f "$lcpp/include/llama.h" ] || { echo "gpu_run.sh: no llama.cpp tree in $b" >&2; exit 1; }
    rm -rf "$carry"
    mkdir -p "$carry/lib"
    # tools/ stays: llama-completion, the program the plugin step runs.
    tar -C "$lcpp" -cJf "$carry/llama.cpp.tar.xz" --exclude=./.git --exclude=./models \
        --exclude=./docs --exclude=./examples --exclude=./tests \
        --exclude=./benches --exclude=./pocs --exclude=./app --exclude=./media .
    (cd "$lcpp" && git rev-parse HEAD 2>/dev/null || echo unknown) > "$carry/llama.cpp.commit"
    cp /usr/include/xxhash.h "$carry/"
    cp "$b/tools/smoe/smoe" "$carry/"
    for l in $(ldd "$b/tools/smoe/smoe" | awk '/=> \// { print $3 }'); do
        case $(basename "$l") in libc.so*|libm.so*|libz.so*) ;; *) cp -L "$l" "$carry/lib/" ;; esac
    done
    du -sh "$carry"
    log "carry build-gpu-carry (and this checkout) to the GPU machine"
}

do_build() {
    [ -f "$carry/llama.cpp.tar.xz" ] || { echo "gpu_run.sh: $carry/llama.cpp.tar.xz missing: run 'gpu_run.sh pack' where llama.cpp was fetched and carry build-gpu-carry" >&2; exit 1; }
    mkdir -p "$work/bin"
    if [ ! -f "$work/llama.cpp/include/llama.h" ]; then
        log "unpacking llama.cpp ($(cat "$carry/llama.cpp.commit"))"
        mkdir -p "$work/llama.cpp"
        tar -C "$work/llama.cpp" -xJf "$carry/llama.cpp.tar.xz"
    fi
    # The library wants pkg-config only for packages this build does not
    # use (xxHash is compiled in): a stand-in where there is none.
    pc=
    if ! command -v pkg-config > /dev/null; then
        printf '#!/bin/sh\n[ "$1" = --version ] && echo 0.29.2 && exit 0\nexit 1\n' > "$work/bin/pkg-config"
        chmod +x "$work/bin/pkg-config"
        pc=-DPKG_CONFIG_EXECUTABLE=$work/bin/pkg-config
    fi
    gen=
    command -v ninja > /dev/null && gen="-G Ninja"
    export PATH=$PATH:/usr/local/cuda/bin
    log "configuring (CUDA $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
    # shellcheck disable=SC2086
    cmake -S . -B "$work/b" $gen $pc -DCMAKE_BUILD_TYPE=Release -DSMOE_BUILD_TESTS=OFF \
        -DSMOE_BUILD_TOOL=OFF -DSMOE_BUILD_EXAMPLES=OFF -DSMOE_BUILD_LLAMA=ON \
        -DSMOE_LLAMA_CPP_DIR="$work/llama.cpp" -DSMOE_XXHASH_INLINE=ON \
        -DSMOE_XXHASH_HEADER="$carry/xxhash.h" -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_FA="${CUDA_FA:-ON}" \
        > "$work/configure.log" ||
        { tail -n 30 "$work/configure.log"; exit 1; }
    [ -z "${CONFIGURE_ONLY:-}" ] || return 0
    log "building smoe-llama, libggml-smoe, llama-completion and llama-bench with $(nproc) jobs"
    # shellcheck disable=SC2086
    cmake --build "$work/b" -j"$(nproc)" --target ${BUILD_TARGETS:-smoe-llama ggml-smoe llama-completion llama-bench} \
        > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
    log "built $work/b/integrations/llama.cpp/smoe-llama and libggml-smoe.so"
}

# page_cache MODE: before a run, the model and vault out of the page cache;
# a stock run's GGUF read back in (stock maps it: the page cache holds it).
page_cache() {
    for f in "$model" "$vault"; do dd if="$f" iflag=nocache count=0 status=none 2> /dev/null || true; done
    case $1 in stock* | bench-stock*) cat "$model" > /dev/null ;; esac
}

# One run: MODE ARGS... -> prints a table row; logits and ids in $work/MODE.*
one() {
    mode=$1
    shift
    page_cache "$mode"
    "$llama" --model "$model" --prompt-tokens "$ptoks" --n-predict "$tokens" --ignore-eos \
        --threads "$threads" --n-gpu-layers "$ngl" --print-token-ids \
        --logits-out "$work/$mode.logits" "$@" > "$work/$mode.out" 2> "$work/$mode.err" ||
        { tail -n 20 "$work/$mode.err"; echo "gpu_run.sh: $mode failed" >&2; exit 1; }
    tail -n "$tokens" "$work/$mode.out" > "$work/$mode.ids"
    line=$(grep 'load .* s, prompt' "$work/$mode.err")
    load=$(echo "$line" | sed -n 's/.*load \([0-9.]*\) s.*/\1/p')
    ttft=$(echo "$line" | sed -n 's/.*first token \([0-9.]*\) s.*/\1/p')
    tps=$(echo "$line" | sed -n 's/.*decode \([0-9.]*\) tokens.*/\1/p')
    same=-
    if [ "$mode" != "$ref" ]; then
        l=differ
        cmp -s "$work/$ref.logits" "$work/$mode.logits" && l=equal
        t=differ
        cmp -s "$work/$ref.ids" "$work/$mode.ids" && t=equal
        same="logits $l, tokens $t (vs $ref)"
    fi
    printf '%-14s %8s %9s %11s   %s\n' "$mode" "$load" "$ttft" "$tps" "$same"
    grep -i 'CUDA0\|offloaded\|ggml_cuda_init: found' "$work/$mode.err" | head -n 3 | sed 's/^/    /' || true
    case $mode in smoe*) grep 'smoe-llama: ' "$work/$mode.err" | grep -v 'load .* s, prompt' |
        sed 's/^/    /' ;; esac
}

do_run() {
    llama=$work/b/integrations/llama.cpp/smoe-llama
    [ -x "$llama" ] || { echo "gpu_run.sh: build first (gpu_run.sh build)" >&2; exit 1; }
    layers=${LAYERS:-24} tokens=${TOKENS:-32} threads=${THREADS:-$(nproc)}
    ngl=${GPU_LAYERS:-99} share=${SHARE:-25}
    export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export OMP_WAIT_POLICY=passive
    smoe=$carry/smoe
    model=$work/qwen3-30b-a3b-$layers.gguf
    vault=$work/qwen3-30b-a3b-$layers.smoe
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /' || true
    if [ ! -f "$model" ]; then
        log "writing $model"
        PYTHONPATH=$work/llama.cpp/gguf-py python3 integrations/llama.cpp/tests/mkmoe.py \
            qwen3-30b-a3b "$model.tmp" --layers "$layers"
        mv "$model.tmp" "$model"
    fi
    if [ ! -f "$vault" ]; then
        log "packing $vault"
        "$smoe" pack --quiet --out "$vault" "$model" > /dev/null
    fi
    info=$("$smoe" inspect "$vault")
    entries=$(echo "$info" | sed -n 's/^entries *\([0-9]*\).*/\1/p')
    slots=$((entries * share / 100))
    ptoks=$(awk 'BEGIN { for (i = 0; i < 16; i++) printf "%s%d", i ? "," : "", (i * 7919 + 13) % 30000 }')
    log "qwen3-30b-a3b shape, $layers layers, $entries experts; ring $slots slots ($share%);" \
        "$threads threads, --n-gpu-layers $ngl"
    printf '%-14s %8s %9s %11s   %s\n' mode load_s ttft_s decode_t/s "vs stock-cpu-moe"
    ref=stock-cpu-moe
    one stock-cpu-moe --resident --cpu-moe
    one smoe --vault "$vault" --ring-slots "$slots" --stats
    one smoe-map --vault "$vault" --ring-slots "$slots" --stats --map
    one smoe-la --vault "$vault" --ring-slots "$slots" --stats --lookahead
    one stock-gpu --resident
    ref=stock-cpu-moe-nofuse
    export GGML_CUDA_DISABLE_FUSION=1
    one stock-cpu-moe-nofuse --resident --cpu-moe
    one smoe-nofuse --vault "$vault" --ring-slots "$slots" --stats
    unset GGML_CUDA_DISABLE_FUSION
}

# One llama-completion run of the plugin step: MODE "ENV..." ARGS... ->
# a table row; text in $work/MODE.out, log in $work/MODE.err.
pone() {
    mode=$1 penv=$2
    shift 2
    page_cache "$mode"
    # shellcheck disable=SC2086
    env $penv "$lcompl" -m "$model" -p "$ptext" -n "$tokens" --temp 0 --seed 7 --ignore-eos \
        -no-cnv -c $((prompt + tokens + 64)) -t "$threads" -ngl "$ngl" "$@" \
        > "$work/$mode.out" 2> "$work/$mode.err" < /dev/null ||
        { tail -n 20 "$work/$mode.err"; echo "gpu_run.sh: $mode failed" >&2; exit 1; }
    set -- $(awk '
        / load time = / { load = $(NF - 1) / 1000 }
        /prompt eval time = / { for (i = 1; i <= NF; i++) if ($i == "ms") { ms = $(i - 1); n = $(i + 2); break }
                                if (ms > 0) pp = n / ms * 1000 }
        / eval time = / && !/prompt/ { for (i = 1; i <= NF; i++) if ($i == "ms") { ms = $(i - 1); n = $(i + 2); break }
                                       if (ms > 0) tg = n / ms * 1000 }
        END { printf "%.2f %.1f %.2f\n", load, pp, tg }' "$work/$mode.err")
    same=-
    if [ "$mode" != "$ref" ]; then
        same=differs
        cmp -s "$work/$ref.out" "$work/$mode.out" && same=equal
        same="text $same (vs $ref)"
    fi
    printf '%-17s %8s %9s %11s   %s\n' "$mode" "$1" "$2" "$3" "$same"
    grep -i 'offloaded .* layers to GPU\|ggml_cuda_init: found\|smoe: ' "$work/$mode.err" |
        head -n 6 | sed 's/^/    /' || true
    stats_line "$work/$mode.json"
}

# stats_line FILE: the plugin's SMOE_STATS counters of a run, if it wrote them.
stats_line() {
    [ -f "$1" ] || return 0
    python3 -c 'import json, sys
st = json.load(open(sys.argv[1]))
print("    SMOE_STATS: " + ", ".join("%s %s" % (k, st[k]) for k in ("slots", "hits", "misses",
      "hit_rate", "bytes_read", "wait_ns", "copy_ns", "hit_ns", "miss_wait_ns") if k in st))' "$1"
}

# The plugin step's model (byte vocabulary) and its vault, once.
plugin_model() {
    smoe=$carry/smoe
    model=$work/qwen3-30b-a3b-${LAYERS:-24}-bv.gguf
    vault=$work/qwen3-30b-a3b-${LAYERS:-24}-bv.smoe
    export LD_LIBRARY_PATH=$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if [ ! -f "$model" ]; then
        log "writing $model"
        PYTHONPATH=$work/llama.cpp/gguf-py python3 integrations/llama.cpp/tests/mkmoe.py \
            qwen3-30b-a3b "$model.tmp" --layers "${LAYERS:-24}" --byte-vocab
        mv "$model.tmp" "$model"
    fi
    if [ ! -f "$vault" ]; then
        log "packing $vault"
        "$smoe" pack --quiet --out "$vault.tmp" "$model" > /dev/null
        mv "$vault.tmp" "$vault"
    fi
}

do_plugin() {
    lcompl=$work/b/bin/llama-completion
    lbench=$work/b/bin/llama-bench
    plugin=$work/b/integrations/llama.cpp/libggml-smoe.so
    [ -x "$lcompl" ] && [ -f "$plugin" ] || { echo "gpu_run.sh: build first (gpu_run.sh build)" >&2; exit 1; }
    layers=${LAYERS:-24} tokens=${TOKENS:-32} threads=${THREADS:-$(nproc)}
    ngl=${GPU_LAYERS:-99} share=${SHARE:-25} prompt=${PROMPT:-128}
    rm -f "$work/plugin.json" "$work/plugin-full.json"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /' || true
    plugin_model
    info=$("$smoe" inspect "$vault")
    entries=$(echo "$info" | sed -n 's/^entries *\([0-9]*\).*/\1/p')
    slots=$((entries * share / 100))
    ptext=$(awk -v n="$prompt" 'BEGIN { w = "the quick brown fox jumps over the lazy dog while five boxing wizards jump quickly "
        while (length(s) < n) s = s w; print substr(s, 1, n) }')
    log "qwen3-30b-a3b shape (byte vocabulary), $layers layers, $entries experts; ring $slots" \
        "slots ($share%); $threads threads, -ngl $ngl; $prompt prompt letters, $tokens tokens"
    printf '%-17s %8s %9s %11s   %s\n' mode load_s prompt_t/s decode_t/s "text"
    ref=stock-cpu-moe-nr
    pl="GGML_BACKEND_PATH=$plugin SMOE_VAULT=$vault"
    pone stock-cpu-moe "" --cpu-moe
    pone stock-cpu-moe-nr "" --cpu-moe --no-repack
    pone plugin "$pl SMOE_RING_SLOTS=$slots SMOE_STATS=$work/plugin.json" -ot exps=SMOE
    pone plugin-full "$pl SMOE_RING_SLOTS=$entries SMOE_STATS=$work/plugin-full.json" -ot exps=SMOE
    pone stock-gpu ""
    env $pl SMOE_RING_SLOTS=$slots "$lcompl" --list-devices 2>&1 | sed 's/^/    /'
    [ "${BENCH:-1}" = 0 ] && return 0
    bp=${BENCH_PROMPT:-512}
    log "llama-bench -p $bp -n $tokens -r 2 -ngl $ngl (warm-up run first)"
    printf '%-20s %11s %11s\n' mode prompt_t/s decode_t/s
    bone bench-stock-cpu-moe "" -ncmoe 99
    bone bench-plugin-full "$pl SMOE_RING_SLOTS=$entries SMOE_STATS=$work/bench-plugin-full.json" -ot exps=SMOE
    bone bench-plugin "$pl SMOE_RING_SLOTS=$slots SMOE_STATS=$work/bench-plugin.json" -ot exps=SMOE
    bone bench-stock-gpu ""
}

# One llama-bench run: MODE "ENV..." ARGS... -> a table row.
bone() {
    mode=$1 penv=$2
    shift 2
    rm -f "$work/$mode.json"
    page_cache "$mode"
    # shellcheck disable=SC2086
    env $penv "$lbench" -m "$model" -p "$bp" -n "$tokens" -r 2 -t "$threads" -ngl "$ngl" \
        -o jsonl "$@" > "$work/$mode.out" 2> "$work/$mode.err" < /dev/null ||
        { tail -n 20 "$work/$mode.err"; echo "gpu_run.sh: $mode failed" >&2; exit 1; }
    python3 -c 'import json, sys
pp = tg = 0.0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["n_gen"] > 0: tg = r["avg_ts"]
    else: pp = r["avg_ts"]
print("%-20s %11.1f %11.2f" % (sys.argv[2], pp, tg))' "$work/$mode.out" "$mode"
    stats_line "$work/$mode.json"
}

case $step in
pack) do_pack ;;
build) do_build ;;
run) do_run ;;
plugin) do_plugin ;;
model) plugin_model ;;
all) do_build && do_run ;;
*) awk 'NR > 1 && /^set -eu/ { exit } NR > 1' "$0"; exit 2 ;;
esac
