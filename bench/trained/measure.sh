#!/bin/sh
# measure.sh TRAINED OUT: the router lookahead off and on, at rings of 10%,
# 25% and 50% of the experts, on the trained models (TRAINED: train.py's
# output directory with fixture/ and large/, their traces, and the GGUFs
# make_fixture.sh / convert_gguf.py write: fixture-bf16.gguf, large-bf16.gguf)
# and on the real traces in $TRACES (default ../shared/traces), side by side:
#  - smoe sim: LRU, LFU, reuse and Belady's optimum on each trace's routing;
#  - smoe bench: the library replaying each trace, without hints and with a
#    simulated lookahead of the recall smoe-llama measured on that model
#    (--spec-recall; $RECALL for the real traces, which carry no hidden state);
#  - smoe-llama --stats-json: the real lookahead on the trained GGUFs;
#  - the plugin (libggml-smoe in stock llama-completion, SMOE_LOOKAHEAD off
#    and 1, SMOE_STATS), run in the same loop as smoe-llama, turn about,
#    when LLAMA_COMPLETION and GGML_SMOE are set;
#  - python_bench.py: stream_experts(lookahead=...) on the trained checkpoints.
# Environment: SMOE_TOOL, SMOE_LLAMA, SMOE_STREAM_LIBRARY, PYTHON,
# LLAMA_COMPLETION and GGML_SMOE (the plugin; optional), MODELS (default
# "fixture large": train.py's output may hold only the fixture).
set -eu
src=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
traces=${TRACES:-$repo/../shared/traces}
py=${PYTHON:-python3}
mkdir -p "$out"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

models=${MODELS:-fixture large}
for m in $models; do
    [ -e "$out/$m.smoe" ] || "$SMOE_TOOL" pack --quiet --out "$out/$m.smoe" "$src/$m-bf16.gguf" > /dev/null
    [ -e "$out/$m-st.smoe" ] || "$SMOE_TOOL" pack --quiet --out "$out/$m-st.smoe" "$src/$m/model.safetensors" > /dev/null
done

sections=${SECTIONS:-llama python traces}
case " $sections " in *" llama "*)
echo "## smoe-llama --lookahead and the plugin's SMOE_LOOKAHEAD (decode of 128 tokens after 64 bytes of held-out text; ${REPS:-3} runs each, off and on alternating)"
prompt=$(head -c 64 "$repo/python/smoe_stream/stream.py")
# plugin M PCT SLOTS LOOK REP: llama-completion with libggml-smoe, the
# same prompt and decode; decode tokens/s from llama.cpp's own eval line.
plugin() {
    j=$out/plugin-$1-$2-$4-$5.json
    env GGML_BACKEND_PATH="$GGML_SMOE" SMOE_VAULT="$out/$1.smoe" SMOE_RING_SLOTS=$3 \
        SMOE_LOOKAHEAD=$([ $4 = on ] && echo 1 || echo 0) SMOE_STATS=$j \
        "$LLAMA_COMPLETION" -m "$src/$1-bf16.gguf" -ot exps=SMOE -p "$prompt" -n 128 \
        --ignore-eos --temp 0 -t 2 -c 512 -no-cnv < /dev/null > /dev/null 2> $j.err
    tps=$(grep ' eval time' $j.err | grep -v 'prompt eval' | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p')
    echo "plugin $1 $2% $3 $4 $5 hit_rate $(field $j hit_rate)" \
         "wait_ms_per_token $(awk -v w=$(field $j wait_ns) 'BEGIN { printf "%.3f", w / 1e6 / 192 }')" \
         "bytes_read_per_token $(( $(field $j bytes_read) / 192 )) decode_tok/s $tps" \
         "recall $(field $j lookahead_recall)"
}
for m in $models; do
    entries=$("$SMOE_TOOL" inspect "$out/$m.smoe" | sed -n 's/^entries *\([0-9]*\).*/\1/p')
    for pct in 10 25 50; do
        slots=$(( (entries * pct + 50) / 100 ))
        for rep in $(seq ${REPS:-3}); do
            for look in off on; do
                flag=; [ $look = on ] && flag=--lookahead
                j=$out/llama-$m-$pct-$look-$rep.json
                "$SMOE_LLAMA" --model "$src/$m-bf16.gguf" --vault "$out/$m.smoe" \
                    --ring-slots $slots --prompt "$prompt" --n-predict 128 --ignore-eos \
                    --threads 2 $flag --stats-json $j > /dev/null 2> $j.err
                tps=$(sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p' $j.err)
                echo "llama $m $pct% $slots $look $rep hit_rate $(field $j hit_rate)" \
                     "wait_ms_per_token $(awk -v w=$(field $j wait_ns) 'BEGIN { printf "%.3f", w / 1e6 / 192 }')" \
                     "bytes_read_per_token $(( $(field $j bytes_read) / 192 )) decode_tok/s $tps" \
                     "recall $(field $j lookahead_recall)"
                [ -z "${LLAMA_COMPLETION:-}" ] || plugin $m $pct $slots $look $rep
            done
        done
    done
done
;; esac

case " $sections " in *" python "*)
echo "## python stream_experts (decode of 128 tokens after 64 bytes of held-out text)"
for m in $models; do
    "$py" "$here/python_bench.py" "$src/$m" "$out/$m-st.smoe" --decode 128
done

;; esac

case " $sections " in *" traces "*)
rec_fixture=$(field "$out/llama-fixture-25-on-1.json" lookahead_recall)
rec_large=$(field "$out/llama-large-25-on-1.json" lookahead_recall)
echo "## smoe sim (Belady beside the history policies) and smoe bench (--spec-recall)"
for t in "$src/fixture.trace.gz:$out/fixture.smoe:$rec_fixture" \
         "$src/large.trace.gz:$out/large.smoe:$rec_large" \
         "$traces/gpt-oss-20b-mmlu-test.trace.gz::${RECALL:-$rec_large}"; do
    trace=${t%%:*}; rest=${t#*:}; vault=${rest%%:*}; recall=${rest#*:}
    [ -e "$trace" ] || { echo "no $trace: skipped"; continue; }
    echo "### $(basename "$trace")"
    "$SMOE_TOOL" sim --size 10%,25%,50% --tokens :2048 "$trace"
    if [ -z "$vault" ]; then  # a vault of random experts of the trace's shape
        vault=$out/gptoss.smoe
        [ -e "$vault" ] || "$SMOE_TOOL" gen --out "$vault" --layers 24 --experts 32 --blob-bytes 176k > /dev/null
    fi
    for pct in 10 25 50; do
        "$SMOE_TOOL" bench --vault "$vault" --trace "$trace" --memory $pct% --workers 2 \
            --tokens 1024 --spec-recall "$recall" 2>&1 | grep -E "^(smoe |smoe\+|offline)"
    done
done
;; esac
