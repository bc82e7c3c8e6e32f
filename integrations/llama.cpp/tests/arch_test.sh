#!/bin/sh
# arch_test.sh ARCH: the llama.cpp integration against stock llama.cpp on a
# tiny MoE GGUF of ARCH (mkmoe.py), packed with `smoe pack`:
#  - the logits of a 32-token prompt are bit-identical to --resident (stock
#    llama.cpp, experts loaded from the GGUF; same build, same threads), and
#    64 greedy tokens are identical, with the ring at 100% of the vault, at
#    25%, and at top-k slots (one token's experts of one layer);
#  - at top-k slots the prompt's union of experts is fetched in waves;
#  - the same, with the ring's pages mapped over the page-aligned expert
#    slices (--map; the others copied): identical again, and experts are
#    mapped where the architecture's slices are whole pages (all but the
#    Q8_0 mixtral here), while a ring of top-k slots evicts every layer;
#  - a vault packed from another model with the same shapes is refused, and
#    so is a vault that does not exist, with its name;
#  - with one blob corrupted and verification on, generation ends with an
#    error naming that expert: no crash, and the tokens printed before it
#    are the reference's.
# Environment: SMOE_LLAMA, SMOE_LLAMA_QUANTIZE, SMOE_TOOL (programs),
# SMOE_LLAMA_PY (python3 with numpy), SMOE_LLAMA_GGUF_PY (gguf-py),
# SMOE_TEST_TMPDIR.
set -eu
arch=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/llama-$arch
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL $arch: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model "$arch" 1
make_fixture other "$arch" 2
vault_sizes model.smoe
[ -n "$entries" ] && [ -n "$topk" ] || fail "cannot read entries and top_k from smoe inspect"

prompt=$(awk 'BEGIN { for (i = 0; i < 32; i++) printf "%s%d", i ? "," : "", (i * 37 + 11) % 500 }')
run() {
    "$SMOE_LLAMA" --model model.gguf --prompt-tokens "$prompt" --n-predict 64 --ignore-eos \
        --threads 2 --print-token-ids "$@"
}
run --resident --logits-out ref.logits > ref.out 2> ref.err || { cat ref.err; fail "resident run"; }
[ "$(stat -c %s ref.logits)" -eq $((32 * 512 * 4)) ] || fail "ref.logits is not 32 x 512 floats"
[ "$(tail -n 64 ref.out | wc -l)" -eq 64 ] || fail "the resident run did not print 64 token ids"

tail -n 64 ref.out > ref.ids
for slots in "$entries" "$quarter" "$topk"; do
    for how in copy map; do
        flag=; [ $how = map ] && flag=--map
        o=s$slots-$how
        run --vault model.smoe --ring-slots "$slots" --logits-out $o.logits --stats $flag \
            > $o.out 2> $o.err || { cat $o.err; fail "streamed run ($how), $slots slots"; }
        grep -q "ring $slots slots" $o.err || { cat $o.err; fail "ring is not $slots slots"; }
        cmp -s ref.logits $o.logits ||
            fail "logits differ from stock llama.cpp at $slots slots ($how)"
        tail -n 64 $o.out > s.ids
        cmp -s ref.ids s.ids ||
            fail "generated tokens differ from stock llama.cpp at $slots slots ($how)"
        mapped=$(sed -n 's/.* \([0-9]*\) of them mapped.*/\1/p' $o.err)
        [ -n "$mapped" ] || { cat $o.err; fail "no count of mapped experts"; }
        if [ $how = copy ] && [ "$mapped" != 0 ]; then fail "$mapped experts mapped without --map"; fi
        if [ $how = map ] && [ "$arch" != mixtral ] && [ "$mapped" = 0 ]; then
            fail "--map mapped no expert at $slots slots"
        fi
        echo "ok $arch: $slots of $entries slots ($how, $mapped experts mapped): logits and" \
            "64 tokens identical; $(grep -o 'hit rate [0-9.]*' $o.err)," \
            "$(grep -o '[0-9]* in waves' $o.err)"
    done
    cp s$slots-copy.err s$slots.err
done
grep -q " 0 in waves" s$topk.err && fail "a ring of $topk slots fetched no union in waves"

# A vault that belongs to another model of the same shapes.
if run --vault other.smoe > mismatch.out 2> mismatch.err; then
    fail "a vault packed from another model was accepted"
fi
grep -q "does not belong to model.gguf" mismatch.err || { cat mismatch.err; fail "mismatch message"; }
echo "ok $arch: a vault packed from another model is refused: $(tail -n 1 mismatch.err)"

# A vault that is not there.
if run --vault missing.smoe > missing.out 2> missing.err; then
    fail "a missing vault was accepted"
fi
grep -q "missing.smoe" missing.err || { cat missing.err; fail "no message naming missing.smoe"; }

# A corrupted blob (expert 3 of the last layer's down tensor), verification on.
last=$(( $(echo "$info" | sed -n 's/^layers *\([0-9]*\)$/\1/p') - 1 ))
py "$here/corrupt.py" model.gguf model.smoe bad.smoe "blk.$last.ffn_down_exps.weight" 3
for flag in "" --map; do
    rc=0
    run --vault bad.smoe --ring-slots "$topk" --verify $flag > bad.out 2> bad.err || rc=$?
    [ "$rc" -eq 1 ] || { cat bad.err; fail "corrupted blob ($flag): exit status $rc, expected 1"; }
    grep -q "reading expert 3 of layer $last from the vault failed: blob checksum mismatch" bad.err ||
        { cat bad.err; fail "corrupted blob ($flag): no error naming expert 3 of layer $last"; }
    n=$(sed '1d' bad.out | grep -c . || true)
    head -n "$n" ref.ids > ref.prefix
    sed '1d' bad.out | grep . > bad.ids || true
    cmp -s ref.prefix bad.ids || fail "corrupted blob ($flag): tokens before the error differ"
    echo "ok $arch: corrupted blob ${flag:+(--map) }ends generation after $n tokens:" \
        "$(grep -o 'reading expert.*' bad.err | head -c 120)"
done
