#!/bin/sh
# plugin_rpc_test.sh ARCH: llama.cpp's distributed engine with libggml-smoe:
# ggml-rpc-server on 127.0.0.1 holds the layers (-ngl 99 --rpc) of a
# llama-completion client that streams its experts through the plugin
# (-ot exps=SMOE): the greedy tokens are stock's (the same client and
# server without the plugin), at rings of 25% and top-k slots.
# Environment: LLAMA_COMPLETION, GGML_RPC_SERVER, GGML_SMOE,
# SMOE_LLAMA_QUANTIZE, SMOE_TOOL, SMOE_LLAMA_PY, SMOE_LLAMA_GGUF_PY,
# SMOE_TEST_TMPDIR.
set -eu
arch=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-rpc-$arch
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL $arch: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model "$arch" 1 --byte-vocab
vault_sizes model.smoe
port=$("$SMOE_LLAMA_PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
"$GGML_RPC_SERVER" -H 127.0.0.1 -p "$port" -t 2 > rpc.log 2>&1 &
rpc=$!
trap 'kill $rpc 2>/dev/null || true' EXIT
i=0
until "$SMOE_LLAMA_PY" -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 300 ] || { cat rpc.log; fail "ggml-rpc-server did not listen"; }
    sleep 0.1
done

prompt="The quick brown fox jumps over the lazy dog."
pre=
complete() {
    run_logged "graphs reused" run.out run.err $pre "$LLAMA_COMPLETION" -m model.gguf \
        -p "$prompt" -n 32 --temp 0 --seed 7 -t 2 -c 256 --ignore-eos -sp -no-cnv \
        --no-warmup -nr --rpc "127.0.0.1:$port" -ngl 99 "$@" || { cat run.out; cat run.err >&2; return 1; }
    cat run.out
    cat run.err >&2
}
complete > ref.out 2> ref.err || { tail ref.err; fail "stock llama-completion with --rpc"; }
grep -q "Accepted client connection" rpc.log || { cat rpc.log; fail "the stock run did not use the RPC server"; }
for slots in "$quarter" "$topk"; do
    pre="env GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=model.smoe SMOE_RING_SLOTS=$slots SMOE_STATS=s$slots.json"
    complete -ot exps=SMOE > s$slots.out 2> s$slots.err || { tail s$slots.err; fail "plugin with --rpc"; }
    grep -q '"expert_nodes": [1-9]' s$slots.json || { cat s$slots.json; fail "no node computed on the ring"; }
    cmp -s ref.out s$slots.out || fail "tokens with --rpc differ at $slots slots"
    echo "ok $arch: ggml-rpc-server holding the layers, experts streamed: identical at $slots slots"
done
