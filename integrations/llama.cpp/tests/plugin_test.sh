#!/bin/sh
# plugin_test.sh ARCH: libggml-smoe loaded into stock llama.cpp programs
# (GGML_BACKEND_PATH, -ot exps=SMOE) against the same programs without it,
# on a tiny MoE GGUF of ARCH with a byte-level vocabulary (mkmoe.py
# --byte-vocab), packed with `smoe pack`:
#  - llama-completion's greedy text (special tokens printed) is identical
#    (both with --no-repack: the CPU backend's repacked kernels apply only
#    to its own buffer type, and they round differently)
#    with the ring at 100% of the vault, at 25%, and at top-k slots; the
#    expert tensors' memory is PROT_NONE, so a node other than the
#    plugin's reading it would crash these runs;
#  - the same with an index vault (`smoe index`), whose experts' components
#    lie at offsets that differ from expert to expert in the mixtral,
#    gpt-oss and olmoe fixtures (offset_passes > 0);
#  - SMOE_STATS writes the counters as JSON (slots as asked, hits, misses,
#    hit_rate, bytes_read, wait_ns, copy_ns 0);
#  - with SMOE_LOOKAHEAD=1 (the router lookahead) the tokens are the same
#    at the same three rings, and SMOE_STATS counts hints, the routings
#    checked against them and lookahead_recall;
#  - llama-perplexity prints identical figures at 25% and top-k slots;
#  - --list-devices names the device, the vault and whether the lookahead
#    is on; without SMOE_VAULT there is no device and the output is
#    stock's;
#  - a vault of another model with the same shapes, and a missing vault,
#    are refused at load with a message naming the tensor or the file,
#    and no crash.
# Environment: LLAMA_COMPLETION, LLAMA_PERPLEXITY (programs), GGML_SMOE
# (libggml-smoe.so), SMOE_LLAMA_QUANTIZE, SMOE_TOOL, SMOE_LLAMA_PY,
# SMOE_LLAMA_GGUF_PY, SMOE_TEST_TMPDIR.
set -eu
arch=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-$arch
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL $arch: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model "$arch" 1 --byte-vocab
make_fixture other "$arch" 2 --byte-vocab
vault_sizes model.smoe
[ -n "$entries" ] && [ -n "$topk" ] || fail "cannot read entries and top_k from smoe inspect"

prompt="The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs."
# $pre: the environment of the next run (env VAR=VALUE ...), word-split.
pre=
complete() {
    run_logged "graphs reused" run.out run.err $pre "$LLAMA_COMPLETION" -m model.gguf \
        -p "$prompt" -n 48 --temp 0 --seed 7 -t 2 -c 256 --ignore-eos -sp -no-cnv \
        --no-warmup -nr "$@" || { cat run.out; cat run.err >&2; return 1; }
    cat run.out
    cat run.err >&2
}
plug="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model.smoe"
# same_tokens O SLOTS WHAT [MARK]: llama-completion with the plugin ($pre)
# into O.out and O.err; the ring is SLOTS slots (and MARK follows on that
# line), and the tokens are stock's (ref.out).
same_tokens() {
    complete -ot exps=SMOE > $1.out 2> $1.err || { cat $1.err; fail "llama-completion $3, $2 slots"; }
    grep -q "ring $2 slots${4:-}" $1.err || { cat $1.err; fail "$3: no 'ring $2 slots${4:-}'"; }
    cmp -s ref.out $1.out ||
        { diff ref.out $1.out | head; fail "llama-completion's tokens differ $3 at $2 slots"; }
}

complete > ref.out 2> ref.err || { cat ref.err; fail "stock llama-completion"; }
[ "$(wc -c < ref.out)" -gt "${#prompt}" ] || fail "stock llama-completion printed no tokens"

# Without SMOE_VAULT the plugin offers no device: stock output.
pre="env GGML_BACKEND_PATH=$GGML_SMOE"
complete > none.out 2> none.err || { cat none.err; fail "no vault"; }
cmp -s ref.out none.out || fail "output with the plugin loaded and no SMOE_VAULT differs"

for slots in "$entries" "$quarter" "$topk"; do
    o=s$slots
    pre="$plug SMOE_RING_SLOTS=$slots SMOE_STATS=$o.json"
    same_tokens $o $slots "with the plugin"
    "$SMOE_LLAMA_PY" - $o.json $slots <<'EOF' || fail "SMOE_STATS at $slots slots"
import json, sys
st = json.load(open(sys.argv[1]))
for k in ("slots", "hits", "misses", "hit_rate", "bytes_read", "wait_ns", "copy_ns"):
    assert k in st, k
assert st["slots"] == int(sys.argv[2]), st
assert st["copy_ns"] == 0 and st["misses"] > 0 and st["bytes_read"] > 0, st
assert st["expert_nodes"] > 0 and 0 <= st["hit_rate"] <= 1, st
EOF
done
# The router lookahead (SMOE_LOOKAHEAD=1): the same tokens at the same
# rings; it learned the routers from the graph, made hints, checked them
# at the next layer's routing and says so in SMOE_STATS. Off (the default)
# it writes "lookahead": false and no figures.
for slots in "$entries" "$quarter" "$topk"; do
    o=l$slots
    pre="$plug SMOE_RING_SLOTS=$slots SMOE_STATS=$o.json SMOE_LOOKAHEAD=1"
    same_tokens $o $slots "with SMOE_LOOKAHEAD=1" ".*lookahead on"
    "$SMOE_LLAMA_PY" - $o.json <<'EOF2' || fail "SMOE_STATS with SMOE_LOOKAHEAD=1 at $slots slots: $(cat $o.json)"
import json, sys
st = json.load(open(sys.argv[1]))
assert st["lookahead"] is True, st
assert st["lookahead_routers"] > 0 and st["lookahead_hints"] > 0, st
assert st["lookahead_layers"] > 0 and st["lookahead_demanded"] > 0, st
assert st["lookahead_renormed"] > 0 and st["lookahead_unseen"] == 0, st
assert 0 <= st["lookahead_recall"] <= 1 and st["lookahead_bytes"] > 0, st
EOF2
    echo "lookahead, $slots slots: recall $("$SMOE_LLAMA_PY" -c "import json; print(json.load(open('$o.json'))['lookahead_recall'])")"
done
"$SMOE_LLAMA_PY" -c "import json,sys; st=json.load(open('s$entries.json')); sys.exit(st['lookahead'] is not False or 'lookahead_recall' in st)" ||
    fail "SMOE_STATS without SMOE_LOOKAHEAD: $(cat s$entries.json)"

# An index vault: the same tokens at the same rings. Its components lie
# where the GGUF puts them, at offsets that differ from expert to expert
# in these small tensors: the plugin computes a group once per offset.
index_fixture model
for slots in "$entries" "$quarter" "$topk"; do
    o=i$slots
    pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model-index.smoe SMOE_RING_SLOTS=$slots SMOE_STATS=$o.json"
    same_tokens $o $slots "with an index vault"
    "$SMOE_LLAMA_PY" -c "import json,sys; st=json.load(open('$o.json')); sys.exit(not (st['copy_ns'] == 0 and st['misses'] > 0))" ||
        fail "index vault at $slots slots: SMOE_STATS $(cat $o.json)"
    passes=$("$SMOE_LLAMA_PY" -c "import json; print(json.load(open('$o.json'))['offset_passes'])")
    echo "index vault, $slots slots: offset_passes $passes"
    # These fixtures' expert slices are not multiples of 4 KiB: their
    # offsets differ (qwen3moe's and glm4moe's are equal: one view).
    case $arch in mixtral|gpt-oss|olmoe)
        [ "$passes" -gt 0 ] || fail "index vault at $slots slots: no group computed per component offset";;
    esac
done
# A packed vault's components lie at one offset: one pass per group.
"$SMOE_LLAMA_PY" -c "import json,sys; sys.exit(json.load(open('s$entries.json'))['offset_passes'] != 0)" ||
    fail "a packed vault was computed per component offset"

# At top-k slots a prompt's union of experts is computed in groups of tokens.
"$SMOE_LLAMA_PY" -c "import json,sys; st=json.load(open('s$topk.json')); sys.exit(st['token_groups'] <= st['expert_nodes'])" ||
    fail "at $topk slots no node was computed in groups of tokens"

# llama-perplexity: identical figures.
"$SMOE_LLAMA_PY" -c "
import random
r = random.Random(3)
w = 'the of and to in is it that was for on are with as his they be at one have this from'.split()
print(' '.join(r.choice(w) for _ in range(400)))" > text.txt
ppl() {
    run_logged "Final estimate" ppl.log ppl.err $pre "$LLAMA_PERPLEXITY" -m model.gguf \
        -f text.txt -c 128 -b 128 -t 2 --chunks 3 -nr "$@" || true
    cat ppl.log ppl.err | grep -oE '^\[[0-9].*|Final estimate.*' > "$out" || true
}
pre= out=ppl.ref
ppl
grep -q "Final estimate" ppl.ref || fail "stock llama-perplexity printed no estimate"
for slots in "$quarter" "$topk"; do
    out=ppl.$slots
    pre="$plug SMOE_RING_SLOTS=$slots"
    ppl -ot exps=SMOE
    cmp -s ppl.ref ppl.$slots || { cat ppl.ref ppl.$slots; fail "llama-perplexity differs at $slots slots"; }
done

# --list-devices names the device, the vault and whether the lookahead is on.
$plug "$LLAMA_COMPLETION" --list-devices > dev.out 2>&1 || true
grep -q "SMOE: smoe_stream: vault model.smoe.*lookahead off" dev.out || { cat dev.out; fail "--list-devices"; }
$plug SMOE_LOOKAHEAD=1 "$LLAMA_COMPLETION" --list-devices > devl.out 2>&1 || true
grep -q "SMOE: smoe_stream: vault model.smoe.*lookahead on" devl.out ||
    { cat devl.out; fail "--list-devices with SMOE_LOOKAHEAD=1 does not say lookahead on"; }

# A vault of another model is refused at load, naming the tensor.
pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=other.smoe"
if complete -ot exps=SMOE > other.out 2> other.err; then
    fail "a vault of another model was accepted"
fi
grep -q "does not belong to this model: expert 0 of tensor blk.[0-9]*.ffn_.*_exps" other.err ||
    { tail other.err; fail "no message naming the tensor for another model's vault"; }
grep -qi "segmentation\|core dumped\|GGML_ASSERT" other.err && fail "another model's vault crashed"

# A missing vault: a clear error at load.
pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=missing.smoe"
if complete -ot exps=SMOE > miss.out 2> miss.err; then
    fail "a missing vault was accepted"
fi
grep -q "SMOE_VAULT=missing.smoe: cannot open the vault" miss.err ||
    { tail miss.err; fail "no message naming the missing vault"; }
echo "ok $arch"
