#!/bin/sh
# plugin_server_test.sh ARCH: llama-server with libggml-smoe answers
# /completion over HTTP (plugin_server.py: temperature 0, token ids) with
# the tokens stock llama-server answers: two requests in a row, then two at
# once with -np 2, at rings of 100%, 25% and top-k slots. With a corrupted
# blob and SMOE_VERIFY=on a request ends with an error and the server
# keeps serving.
# Environment: LLAMA_SERVER, GGML_SMOE, SMOE_LLAMA_QUANTIZE, SMOE_TOOL,
# SMOE_LLAMA_PY, SMOE_LLAMA_GGUF_PY, SMOE_TEST_TMPDIR.
set -eu
arch=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-server-$arch
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL $arch: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model "$arch" 1 --byte-vocab
vault_sizes model.smoe
serve() { # OUT ENV... : plugin_server.py with llama-server under env ENV
    o=$1
    shift
    env "$@" "$SMOE_LLAMA_PY" "$here/plugin_server.py" $o "$LLAMA_SERVER" -m model.gguf \
        -t 2 -c 512 -np 2 --no-warmup -nr --temp 0 $extra || { tail -n 20 $o.log; fail "$o"; }
}
same() { # A B: the same token ids, and some
    "$SMOE_LLAMA_PY" -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert all(isinstance(t, list) and len(t) == 24 for t in a['row'] + a['parallel']), a
sys.exit(a != b)" "$1" "$2"
}
extra=
serve ref.json SMOE_UNUSED=1
for slots in "$entries" "$quarter" "$topk"; do
    extra="-ot exps=SMOE"
    serve s$slots.json GGML_BACKEND_PATH="$GGML_SMOE" SMOE_VAULT=model.smoe SMOE_RING_SLOTS=$slots
    grep -q "ring $slots slots" s$slots.json.log || { tail s$slots.json.log; fail "ring not $slots slots"; }
    same ref.json s$slots.json || fail "llama-server's tokens differ at $slots slots"
    echo "ok $arch: llama-server at $slots slots: identical tokens (in a row and two at once)"
done

# A corrupted blob, verification on: the request fails, the server stays.
last=$(( $(echo "$info" | sed -n 's/^layers *\([0-9]*\)$/\1/p') - 1 ))
# Experts 1 to 6 of the last layer's down projection (0 and the last are
# compared with the GGUF at load): the first request routes to some.
cp model.smoe bad.smoe
for e in 1 2 3 4 5 6; do
    py "$here/corrupt.py" model.gguf bad.smoe bad.tmp "blk.$last.ffn_down_exps.weight" $e
    mv bad.tmp bad.smoe
done
env GGML_BACKEND_PATH="$GGML_SMOE" SMOE_VAULT=bad.smoe SMOE_VERIFY=on SMOE_RING_SLOTS=$topk \
    "$SMOE_LLAMA_PY" "$here/plugin_server.py" --expect-error bad.json "$LLAMA_SERVER" \
    -m model.gguf -t 2 -c 512 -np 2 --no-warmup -nr -ot exps=SMOE || { tail bad.json.log; fail "bad vault run"; }
"$SMOE_LLAMA_PY" -c "
import json, sys
r = json.load(open('bad.json'))
assert isinstance(r['first'], dict) and r['first']['status'] >= 400, r
assert r['after'] == 200 and r['alive'], r" || { cat bad.json; tail bad.json.log; fail "failed read in llama-server"; }
grep -q "reading expert [0-9]* of layer $last from the vault failed: blob checksum mismatch" \
    bad.json.log || { tail bad.json.log; fail "no message naming the expert"; }
# A failed read leaves no slot pinned: the next request's claims are not
# refused for a full ring (they were, after two minutes, when the demand
# prefetches of a failed group were left unclaimed).
if grep -q "ring full" bad.json.log; then tail bad.json.log; fail "a failed read left the ring full"; fi
echo "ok $arch: a failed read ends the request ($(grep -o 'reading expert [0-9]* of layer [0-9]*' bad.json.log | head -n 1)); the server keeps serving"
