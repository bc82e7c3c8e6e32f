#!/bin/sh
# prompt_test.sh CASE: how smoe-llama takes a prompt, on a tiny qwen3moe
# GGUF (mkmoe.py) packed with `smoe pack`.
#  batch: a --batch-size smaller than the prompt (32 tokens in batches of 7
#    and of 1, the last batch short) is decoded batch after batch, as
#    llama.cpp's own programs do: exit 0, the logits of every prompt
#    position written, and with the experts streamed the logits and 64
#    greedy tokens bit-identical to --resident at the same batch size, and
#    the logits within 2% (of their largest) of the whole prompt decoded in
#    one batch (before: GGML_ASSERT(n_tokens_all <= cparams.n_batch), exit
#    134).
#  no-tokenizer: --prompt TEXT on a GGUF without a tokenizer
#    (tokenizer.ggml.model "none") exits 2 with a message naming
#    --prompt-tokens, streamed and --resident, and no ggml assertion or
#    backtrace (before: an assertion in llama.cpp's tokenizer, exit 134).
# Environment: as arch_test.sh.
set -eu
case=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/prompt-$case
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL prompt $case: $*" >&2; exit 1; }
. "$here/fixture.sh"
make_fixture model qwen3moe 1

prompt=$(awk 'BEGIN { for (i = 0; i < 32; i++) printf "%s%d", i ? "," : "", (i * 37 + 11) % 500 }')
run() {
    "$SMOE_LLAMA" --model model.gguf --n-predict 64 --ignore-eos --threads 2 \
        --print-token-ids "$@"
}

case $case in
batch)
    # The reference: the whole prompt in one batch.
    run --resident --prompt-tokens "$prompt" --logits-out one.logits > one.out 2> one.err ||
        { cat one.err; fail "the prompt in one batch"; }
    for b in 7 1; do
        for how in resident stream; do
            o=b$b-$how
            mode=--resident; [ $how = stream ] && mode="--vault model.smoe"
            rc=0
            run $mode --prompt-tokens "$prompt" --batch-size $b --logits-out $o.logits \
                > $o.out 2> $o.err || rc=$?
            [ "$rc" = 0 ] || { cat $o.err; fail "--batch-size $b ($how): exit $rc"; }
            [ "$(stat -c %s $o.logits)" -eq $((32 * 512 * 4)) ] ||
                fail "--batch-size $b ($how): the logits are not 32 x 512 floats"
            tail -n 64 $o.out > $o.ids
            [ "$(grep -c . $o.ids)" -eq 64 ] ||
                fail "--batch-size $b ($how): not 64 generated tokens"
        done
        cmp -s b$b-resident.logits b$b-stream.logits ||
            fail "--batch-size $b: streamed logits differ from --resident"
        cmp -s b$b-resident.ids b$b-stream.ids ||
            fail "--batch-size $b: streamed tokens differ from --resident"
        # Against one batch: the same positions, within the rounding of
        # other kernel shapes (a row at a wrong position differs by the
        # logits' own size).
        d=$(py -c 'import sys, numpy as n
a, b = (n.fromfile(f, "<f4") for f in sys.argv[1:])
print("%.6f" % (abs(a - b).max() / abs(a).max()))' one.logits b$b-resident.logits)
        awk -v d="$d" 'BEGIN { exit !(d < 0.02) }' ||
            fail "--batch-size $b: logits differ from the one-batch run's by $d of their range"
        echo "ok prompt batch: 32 prompt tokens in batches of $b: logits and 64 tokens" \
            "identical, streamed and --resident; within $d of the one-batch logits"
    done
    ;;
no-tokenizer)
    for how in resident stream; do
        mode=--resident; [ $how = stream ] && mode="--vault model.smoe"
        rc=0
        run $mode --prompt "Once upon a time" > $how.out 2> $how.err || rc=$?
        [ "$rc" = 2 ] || { cat $how.err; fail "--prompt without a tokenizer ($how): exit $rc, expected 2"; }
        grep -q -- "--prompt-tokens" $how.err || { cat $how.err; fail "no word of --prompt-tokens"; }
        if grep -qi "GGML_ASSERT\|backtrace\|Aborted" $how.err; then
            cat $how.err
            fail "an assertion or a backtrace ($how)"
        fi
        echo "ok prompt no-tokenizer ($how): $(grep -- --prompt-tokens $how.err | head -n 1)"
    done
    ;;
*)
    fail "unknown case (batch, no-tokenizer)"
    ;;
esac
