#!/bin/sh
# plugin_serve_test.sh: serve mode with libggml-smoe. A first program run
# leaves the popularity histogram (<vault>.freq); llama-server started
# again loads it and, while it waits for requests, the pre-warm refills the
# ring (the library pre-warms rings of more than 128 slots: a 40-layer
# qwen3moe of 320 experts, 256 slots); a request is then answered with the
# tokens stock llama-server gives.
# Environment: LLAMA_COMPLETION, LLAMA_SERVER, GGML_SMOE, SMOE_TOOL,
# SMOE_LLAMA_PY, SMOE_LLAMA_GGUF_PY, SMOE_TEST_TMPDIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-serve
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL serve: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model qwen3moe 1 --byte-vocab --layers 40
plug="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model.smoe SMOE_RING_SLOTS=256"
$plug "$LLAMA_COMPLETION" -m model.gguf -p "The quick brown fox" -n 8 -t 2 -no-cnv \
    --no-warmup -nr -ot exps=SMOE < /dev/null > first.out 2> first.err ||
    { tail first.err; fail "first run"; }
[ -s model.smoe.freq ] || fail "no histogram (model.smoe.freq) after the first run"

# The server idles a second before plugin_server.py's first request (its
# start and the health checks); SMOE_STATS shows what the pre-warm did.
serve() {
    o=$1
    shift
    "$@" "$SMOE_LLAMA_PY" "$here/plugin_server.py" $o "$LLAMA_SERVER" -m model.gguf -t 2 \
        -c 512 -np 2 --no-warmup -nr --temp 0 $extra || { tail -n 20 $o.log; fail "$o"; }
}
extra=
serve ref.json env
extra="-ot exps=SMOE"
serve s.json $plug SMOE_STATS=serve.json
cmp -s ref.json s.json || fail "llama-server's tokens differ after the pre-warm"
"$SMOE_LLAMA_PY" - serve.json <<'EOF' || fail "serve mode counters: $(cat serve.json)"
import json, sys
st = json.load(open(sys.argv[1]))
assert st["freq_status"] == 1, "the histogram was not loaded"
assert st["prewarm_slots"] > 0 and st["prewarm_reads"] > 0, "no pre-warm read"
EOF
echo "ok serve: histogram loaded, $(sed 's/.*"prewarm_reads": \([0-9]*\).*/\1/' serve.json) pre-warm reads while idle, tokens identical"
