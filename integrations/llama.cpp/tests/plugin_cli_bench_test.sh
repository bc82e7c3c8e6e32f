#!/bin/sh
# plugin_cli_bench_test.sh: libggml-smoe in llama-cli (the chat program)
# and llama-bench, driven as their users drive them, on the trained fixture
# (tests/fixtures/trained, Q8_0):
#  - llama-cli, one turn (-st) at temperature 0, answers the same text as
#    stock llama-cli with the ring at 100% of the vault and at top-k slots,
#    and SMOE_STATS counts the claims it made (copy_ns 0);
#  - llama-cli --list-devices names the device, the vault and the ring;
#  - llama-bench with -ot exps=SMOE runs its prompt and generation tests,
#    reports the SMOE backend and the override, and SMOE_STATS shows that
#    the experts came through the ring at the slots asked;
#  - llama-completion with the flags users add (--no-mmap: the loader
#    reads the experts into the buffer, which drops them; --mlock;
#    -fa on with a quantized KV cache; -ub 1) writes the same text as
#    stock with the same flags, at 25% of the vault.
# Environment: LLAMA_CLI, LLAMA_BENCH, LLAMA_COMPLETION, GGML_SMOE,
# SMOE_TOOL, SMOE_LLAMA_PY, SMOE_TEST_TMPDIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
fx=$repo/tests/fixtures/trained
g=$fx/model-q8_0.gguf
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-cli-bench
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL cli-bench: $*" >&2; exit 1; }
. "$here/fixture.sh"
"$SMOE_TOOL" pack --quiet --out m.smoe "$g" > /dev/null || fail "smoe pack"
vault_sizes m.smoe
plug="GGML_BACKEND_PATH=$GGML_SMOE SMOE_VAULT=m.smoe"

# chat OUT "ENV..." [ARGS...]: one llama-cli turn; its answer, without
# the speed line, into OUT.
chat() {
    o=$1 ce=$2
    shift 2
    # shellcheck disable=SC2086
    env $ce "$LLAMA_CLI" -m "$g" -p "def read_lines(path):" -n 32 --temp 0 --seed 7 -st \
        --simple-io -t 2 -c 512 -nr --no-warmup "$@" < /dev/null > $o.raw 2> $o.err ||
        { tail -n 20 $o.err; fail "llama-cli ($o)"; }
    grep -v 't/s' $o.raw > $o || true
    grep -q 'def read_lines' $o || { cat $o.raw; fail "llama-cli ($o) did not echo the prompt"; }
}
chat ref ""
[ "$(wc -l < ref)" -gt 2 ] || fail "stock llama-cli answered nothing: $(cat ref.raw)"
for slots in "$entries" "$topk"; do
    chat s$slots "$plug SMOE_RING_SLOTS=$slots SMOE_STATS=s$slots.json" -ot exps=SMOE
    grep -q "ring $slots slots" s$slots.err || { cat s$slots.err; fail "llama-cli: no 'ring $slots slots'"; }
    cmp -s ref s$slots || { diff ref s$slots | head; fail "llama-cli's answer differs at $slots slots"; }
    "$SMOE_LLAMA_PY" - s$slots.json "$slots" <<'EOF' || fail "llama-cli's SMOE_STATS at $slots slots"
import json, sys
st = json.load(open(sys.argv[1]))
assert st["slots"] == int(sys.argv[2]), st
assert st["hits"] + st["misses"] > 0 and st["copy_ns"] == 0 and st["reads_failed"] == 0, st
EOF
    echo "ok llama-cli: the same answer at $slots slots"
done

env $plug SMOE_RING_SLOTS="$topk" "$LLAMA_CLI" --list-devices > list.out 2>&1 ||
    { cat list.out; fail "llama-cli --list-devices"; }
grep -q "SMOE: smoe_stream: vault m.smoe, ring of $topk slots" list.out ||
    { cat list.out; fail "llama-cli --list-devices does not name the device, vault and ring"; }
echo "ok llama-cli --list-devices"

env $plug SMOE_RING_SLOTS="$topk" SMOE_STATS=bench.json "$LLAMA_BENCH" -m "$g" -ot exps=SMOE \
    -p 32 -n 8 -r 2 -t 2 -o jsonl < /dev/null > bench.out 2> bench.err ||
    { tail -n 20 bench.err; fail "llama-bench with the plugin"; }
"$SMOE_LLAMA_PY" - bench.out bench.json "$topk" <<'EOF' || { cat bench.out; fail "llama-bench's rows or SMOE_STATS"; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert sorted((r["n_prompt"], r["n_gen"]) for r in rows) == [(0, 8), (32, 0)], rows
for r in rows:
    assert "SMOE" in r["backends"] and r["tensor_buft_overrides"] == "exps=SMOE", r
    assert r["avg_ts"] > 0 and len(r["samples_ns"]) == 2, r
st = json.load(open(sys.argv[2]))
assert st["slots"] == int(sys.argv[3]), st
# two prompt tests of 32 tokens and 2 x 8 generated tokens, after a
# warm-up of each: every one routes its top-k experts in each layer
assert st["claims"] >= st["slots"] and st["misses"] > 0 and st["copy_ns"] == 0, st
EOF
echo "ok llama-bench with the plugin"

# complete OUT "ENV..." ARGS...: llama-completion's greedy text into OUT.
complete() {
    o=$1 ce=$2
    shift 2
    # shellcheck disable=SC2086
    run_logged "graphs reused" $o $o.err env $ce "$LLAMA_COMPLETION" -m "$g" \
        -p "def main(argv):" -n 32 --temp 0 --seed 7 -t 2 -c 256 --ignore-eos -no-cnv \
        --no-warmup -nr "$@" || { tail -n 20 $o.err; fail "llama-completion ($o)"; }
}

n=0
for flags in "--no-mmap" "--mlock" "-fa on -ctk q8_0 -ctv q8_0" "-ub 1 -b 1"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    complete c$n.ref "" $flags
    # shellcheck disable=SC2086
    complete c$n.plug "$plug SMOE_RING_SLOTS=$quarter" $flags -ot exps=SMOE
    grep -q "ring $quarter slots" c$n.plug.err ||
        { tail -n 20 c$n.plug.err; fail "llama-completion $flags: the plugin did not open"; }
    cmp -s c$n.ref c$n.plug ||
        { diff c$n.ref c$n.plug | head; fail "llama-completion $flags: text differs from stock's"; }
    echo "ok llama-completion $flags: stock's text at $quarter slots"
done
