#!/bin/sh
# plugin_look_test.sh: the router lookahead of libggml-smoe (SMOE_LOOKAHEAD=1)
# on the trained fixture (tests/fixtures/trained, bf16: a byte-level
# Qwen3-MoE whose routers route for real), in stock llama-completion:
#  - greedy tokens after a held-out Python prompt are identical to stock
#    llama-completion's with the ring at 100% of the vault, at 25% and at
#    top-k slots;
#  - one token a ubatch over 600 bytes of held-out text (the project's own
#    Python source, which training never saw), the lookahead recalls at
#    least half of the experts each next layer demands, and more than
#    chance (top_k / experts) plus a quarter: layer L's router in place of
#    L+1's, or no lookahead, fails this.
# Environment: LLAMA_COMPLETION, GGML_SMOE, SMOE_TOOL, SMOE_LLAMA_PY,
# SMOE_TEST_TMPDIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
fx=$repo/tests/fixtures/trained
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-look-trained
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL plugin lookahead: $*" >&2; exit 1; }
. "$here/fixture.sh"
field() { "$SMOE_LLAMA_PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

g=$fx/model-bf16.gguf
"$SMOE_TOOL" pack --quiet --out model.smoe "$g" > /dev/null || fail "smoe pack"
vault_sizes model.smoe
experts=$(echo "$info" | sed -n 's/^experts *\([0-9]*\) per layer$/\1/p')
[ -n "$experts" ] && [ -n "$topk" ] || fail "cannot read experts and top_k: $info"
head -c 300 "$repo/python/smoe_stream/hf.py" > prompt.txt
head -c 600 "$repo/python/smoe_stream/stream.py" > held.txt

pre=
complete() { # OUT, then options
    o=$1
    shift
    run_logged "graphs reused" $o.out $o.err $pre "$LLAMA_COMPLETION" -m "$g" -t 2 -c 1024 \
        --temp 0 --seed 7 --ignore-eos -no-cnv --no-warmup -nr "$@" ||
        { cat $o.err >&2; fail "llama-completion ($o)"; }
}
complete ref -f prompt.txt -n 32
[ "$(wc -c < ref.out)" -gt 300 ] || fail "stock llama-completion printed no tokens"
for slots in "$entries" "$quarter" "$topk"; do
    pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model.smoe SMOE_RING_SLOTS=$slots SMOE_LOOKAHEAD=1 SMOE_STATS=s$slots.json"
    complete s$slots -f prompt.txt -n 32 -ot exps=SMOE
    grep -q "ring $slots slots.*lookahead on" s$slots.err || { cat s$slots.err; fail "lookahead is not on"; }
    cmp -s ref.out s$slots.out ||
        { diff ref.out s$slots.out | head; fail "tokens differ from stock with SMOE_LOOKAHEAD=1 at $slots slots"; }
    echo "ok trained: tokens identical with SMOE_LOOKAHEAD=1 at $slots slots" \
         "(recall $(field s$slots.json lookahead_recall))"
done

# Recall, one token a ubatch, on held-out text.
pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model.smoe SMOE_RING_SLOTS=$quarter SMOE_LOOKAHEAD=1 SMOE_STATS=look.json"
complete look -f held.txt -n 1 -b 1 -ub 1 -ot exps=SMOE
recall=$(field look.json lookahead_recall)
layers=$(field look.json lookahead_layers)
[ "$layers" -gt 500 ] || fail "only $layers routings checked against hints: $(cat look.json)"
awk -v r="$recall" -v k="$topk" -v e="$experts" 'BEGIN { exit !(r >= 0.5 && r >= k / e + 0.25) }' ||
    fail "lookahead recall $recall on held-out text: below 0.5 or chance ($topk/$experts) + 0.25"
echo "ok trained: lookahead recall $recall over $layers routings of held-out text" \
     "(chance $topk/$experts)"
