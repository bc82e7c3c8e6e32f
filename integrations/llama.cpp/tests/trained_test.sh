#!/bin/sh
# trained_test.sh: the llama.cpp integration on the trained fixture
# (tests/fixtures/trained: a byte-level Qwen3-MoE trained on Python sources,
# GGUF bf16 and Q8_0 written by llama.cpp's converter), on a text prompt
# that stock llama.cpp tokenizes into byte ids:
#  - the prompt's logits and 32 greedy tokens are bit-identical to stock
#    llama.cpp (--resident) with the ring at 100% of the vault, at 25% and at
#    top-k slots, for a packed vault of each GGUF, and with --lookahead at
#    25%;
#  - the text's tokens are its bytes (the logits of --prompt TEXT equal those
#    of --prompt-tokens with its bytes);
#  - the router lookahead, one token a ubatch on held-out text (the project's
#    own Python source, which training never saw), recalls at least half of
#    the next layer's experts and well above chance (top-k / experts).
# Environment: SMOE_LLAMA, SMOE_TOOL, SMOE_TEST_TMPDIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
fx=$repo/tests/fixtures/trained
dir=${SMOE_TEST_TMPDIR:-/tmp}/llama-trained
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL trained: $*" >&2; exit 1; }
. "$here/fixture.sh"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

# Held-out text: the start of the binding's hf.py (under 8 KiB of context).
prompt=$(head -c 300 "$repo/python/smoe_stream/hf.py")
bytes=$(printf '%s' "$prompt" | od -An -v -tu1 | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
run() { # gguf, then options
    m=$1
    shift
    "$SMOE_LLAMA" --model "$fx/$m" --n-predict 32 --ignore-eos --threads 2 --print-token-ids "$@"
}

for g in model-bf16.gguf model-q8_0.gguf; do
    t=${g%.gguf}
    "$SMOE_TOOL" pack --quiet --out $t.smoe "$fx/$g" > /dev/null || fail "smoe pack $g"
    vaults=$t.smoe
    vault_sizes $t.smoe
    [ "$entries" = 96 ] && [ "$topk" = 4 ] || fail "$g: expected 96 entries, top_k 4: $info"
    run $g --resident --prompt "$prompt" --logits-out $t-ref.logits > $t-ref.out 2> $t-ref.err ||
        { cat $t-ref.err; fail "$g: resident run"; }
    n=$(printf '%s' "$prompt" | wc -c)
    [ "$(stat -c %s $t-ref.logits)" -eq $((n * 256 * 4)) ] || fail "$g: logits are not $n x 256"
    run $g --resident --prompt-tokens "$bytes" --logits-out $t-bytes.logits > /dev/null 2>&1 ||
        fail "$g: resident run on the prompt's bytes"
    cmp -s $t-ref.logits $t-bytes.logits || fail "$g: the text is not tokenized into its bytes"
    tail -n 32 $t-ref.out > $t-ref.ids
    for v in $vaults; do
        for slots in "$entries" "$quarter" "$topk" "$quarter+lookahead"; do
            s=${slots%+lookahead}
            extra=
            [ "$s" = "$slots" ] || extra=--lookahead
            o=${v%.smoe}-$s$extra
            run $g --vault $v --ring-slots $s --prompt "$prompt" --logits-out $o.logits --stats \
                $extra > $o.out 2> $o.err || { cat $o.err; fail "$v: streamed run, $slots slots"; }
            grep -q "ring $s slots" $o.err || { cat $o.err; fail "$v: ring is not $s slots"; }
            cmp -s $t-ref.logits $o.logits || fail "$v: logits differ from stock at $slots slots"
            tail -n 32 $o.out > $o.ids
            cmp -s $t-ref.ids $o.ids || fail "$v: tokens differ from stock at $slots slots"
            echo "ok trained $v: $slots of $entries slots: logits and 32 tokens identical to" \
                 "stock; $(grep -o 'hit rate [0-9.]*' $o.err)"
        done
    done
done

# The lookahead's recall, one token a ubatch, on held-out text.
held=$(head -c 600 "$repo/python/smoe_stream/stream.py")
"$SMOE_LLAMA" --model "$fx/model-bf16.gguf" --vault model-bf16.smoe --ring-slots 24 \
    --prompt "$held" --n-predict 1 --threads 2 --ubatch-size 1 --lookahead \
    --stats-json look.json > look.out 2> look.err || { cat look.err; fail "lookahead run"; }
recall=$(field look.json lookahead_recall)
layers=$(field look.json lookahead_layers)
[ -n "$recall" ] && [ "${layers:-0}" -gt 0 ] || { cat look.json; fail "no lookahead figures"; }
# chance: 4 of 16 experts
awk -v r="$recall" 'BEGIN { exit !(r >= 0.5 && r >= 0.25 + 0.25) }' ||
    fail "lookahead recall $recall on held-out text: below 0.5 (chance 0.25)"
echo "ok trained: lookahead recall $recall over $layers routings of held-out text (chance 0.25)"
