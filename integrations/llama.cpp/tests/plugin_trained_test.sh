#!/bin/sh
# plugin_trained_test.sh: libggml-smoe in llama-server on the trained
# fixture (tests/fixtures/trained: a byte-level Qwen3-MoE trained on Python
# sources, GGUF bf16 and Q8_0 from llama.cpp's converter), whose output is
# text: /completion on Python prompts, at temperature 0 and without a
# grammar, answers the same text and token ids as stock llama-server, two
# requests in a row and two at once (-np 2), with the ring at 100% of the
# vault, at 25% and at top-k slots, from a packed vault (`smoe pack`) and
# from an index vault (`smoe index`: the experts read from the GGUF itself).
# Environment: LLAMA_SERVER, GGML_SMOE, SMOE_TOOL, SMOE_LLAMA_PY,
# SMOE_TEST_TMPDIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
fx=$repo/tests/fixtures/trained
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-trained
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL trained: $*" >&2; exit 1; }
. "$here/fixture.sh"
for g in model-bf16.gguf model-q8_0.gguf; do
    t=${g%.gguf}
    "$SMOE_TOOL" pack --quiet --out $t.smoe "$fx/$g" > /dev/null || fail "smoe pack $g"
    "$SMOE_TOOL" index --quiet --out $t-index.smoe "$fx/$g" > /dev/null || fail "smoe index $g"
    vault_sizes $t.smoe
    serve() { # OUT [ENV...]
        o=$1
        shift
        env "$@" "$SMOE_LLAMA_PY" "$here/plugin_server.py" --text $o "$LLAMA_SERVER" \
            -m "$fx/$g" -t 2 -c 1024 -np 2 --no-warmup -nr --temp 0 $extra ||
            { tail -n 20 $o.log; fail "$o"; }
    }
    extra=
    serve $t.ref.json SMOE_UNUSED=1
    "$SMOE_LLAMA_PY" -c "
import json, sys
a = json.load(open(sys.argv[1]))
assert all(isinstance(r, list) and isinstance(r[0], str) and len(r) == 25 for r in a['row'] + a['parallel']), a" \
        $t.ref.json || fail "stock llama-server did not answer text on $g: $(cat $t.ref.json)"
    for v in $t $t-index; do
        for slots in "$entries" $(( (entries + 3) / 4 )) "$topk"; do
            extra="-ot exps=SMOE"
            serve $v.$slots.json GGML_BACKEND_PATH="$GGML_SMOE" SMOE_VAULT=$v.smoe SMOE_RING_SLOTS=$slots
            cmp -s $t.ref.json $v.$slots.json ||
                fail "$g: llama-server's answers differ at $slots slots ($v.smoe)"
            echo "ok trained $g: llama-server's text identical at $slots slots ($v.smoe)"
        done
    done
done
