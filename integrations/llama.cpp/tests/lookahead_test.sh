#!/bin/sh
# lookahead_test.sh ARCH: the router lookahead (smoe-llama --lookahead) on
# tiny MoE GGUFs of ARCH (mkmoe.py), packed with `smoe pack`:
#  - on a random model, with the ring at 100%, 25% and top-k slots, and
#    with --map at 25%: hints were issued (lookahead_hints > 0) for every
#    routing that has a next MoE layer, every lookahead found its router
#    input, lookahead_recall is a number in [0, 1], and the logits of a
#    32-token prompt and 64 greedy tokens are bit-identical to stock
#    llama.cpp's (--resident); without --lookahead no hint is made;
#  - on a near-identity model (mkmoe.py --near-identity: every layer
#    passes its input on almost unchanged, each layer with its own router),
#    layer L+1's router applied to layer L's state chooses what L+1 then
#    chooses: lookahead_recall >= 0.9. A lookahead that used the wrong
#    layer's router, dropped the router's bias (gpt-oss) or the selection
#    bias (glm4moe), or read the wrong tensor would recall about
#    top-k / experts (0.25 to 0.5 here).
# Environment: as arch_test.sh.
set -eu
arch=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/lookahead-$arch
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL lookahead $arch: $*" >&2; exit 1; }
. "$here/fixture.sh"

prompt=$(awk 'BEGIN { for (i = 0; i < 32; i++) printf "%s%d", i ? "," : "", (i * 37 + 11) % 500 }')
run() { # model, then options
    m=$1
    shift
    "$SMOE_LLAMA" --model $m.gguf --prompt-tokens "$prompt" --n-predict 64 --ignore-eos \
        --threads 2 --print-token-ids "$@"
}
field() { # json file, field: its value
    sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"
}
# check NAME.json: hints made, router input always found, recall in [0, 1]
check_stats() {
    j=$1.json
    hints=$(field $j lookahead_hints)
    layers=$(field $j lookahead_layers)
    recall=$(field $j lookahead_recall)
    unseen=$(field $j lookahead_unseen)
    renormed=$(field $j lookahead_renormed)
    [ -n "$hints" ] && [ -n "$recall" ] || { cat $j; fail "$1: no lookahead fields"; }
    [ "$hints" -gt 0 ] || fail "$1: no hint was issued"
    [ "$layers" -gt 0 ] || fail "$1: no routing was checked against its hints"
    [ "$unseen" -eq 0 ] || fail "$1: $unseen routings without a router input"
    [ "$renormed" -gt 0 ] || fail "$1: no lookahead renormalised the residual with L+1's norm"
    awk -v r="$recall" 'BEGIN { exit !(r >= 0 && r <= 1) }' || fail "$1: recall $recall not in [0, 1]"
}
same_as_ref() { # run name, reference name
    cmp -s $2.logits $1.logits || fail "$1: logits differ from stock llama.cpp"
    tail -n 64 $2.out > ref.ids
    tail -n 64 $1.out > run.ids
    cmp -s ref.ids run.ids || fail "$1: generated tokens differ from stock llama.cpp"
}

make_fixture model "$arch" 1
make_fixture near "$arch" 3 --near-identity
vault_sizes model.smoe

for m in model near; do
    run $m --resident --logits-out ref-$m.logits > ref-$m.out 2> ref-$m.err ||
        { cat ref-$m.err; fail "resident run of $m"; }
done

# Without --lookahead: no hint.
run model --vault model.smoe --ring-slots "$quarter" --stats-json off.json > off.out 2> off.err ||
    { cat off.err; fail "streamed run without lookahead"; }
[ "$(field off.json lookahead_hints)" = 0 ] && [ "$(field off.json prefetch_hint)" = 0 ] ||
    { cat off.json; fail "hints were made without --lookahead"; }

for slots in "$entries" "$quarter" "$topk" "$quarter-map"; do
    flag=; case $slots in *-map) flag=--map ;; esac
    o=la-$slots
    run model --vault model.smoe --ring-slots "${slots%-map}" --lookahead $flag --stats \
        --stats-json $o.json --logits-out $o.logits > $o.out 2> $o.err ||
        { cat $o.err; fail "streamed run with lookahead, $slots slots"; }
    same_as_ref $o ref-model
    check_stats $o
    echo "ok lookahead $arch: $slots of $entries slots: logits and 64 tokens identical;" \
        "lookahead_hints $(field $o.json lookahead_hints) for $(field $o.json lookahead_layers)" \
        "routings, lookahead_recall $(field $o.json lookahead_recall) (random weights)"
done

run near --vault near.smoe --ring-slots "$quarter" --lookahead --stats-json near.json \
    --logits-out near.logits > near.out 2> near.err || { cat near.err; fail "near-identity run"; }
same_as_ref near ref-near
check_stats near
recall=$(field near.json lookahead_recall)
awk -v r="$recall" 'BEGIN { exit !(r >= 0.9) }' ||
    fail "near-identity model: lookahead_recall $recall, expected >= 0.9 (the next layer's" \
        "router on this layer's state should choose what the next layer does)"
echo "ok lookahead $arch: near-identity model, lookahead_recall $recall" \
    "($(field near.json lookahead_true) of $(field near.json lookahead_demanded) experts)"
