#!/bin/sh
# plugin_replay_test.sh: libggml-smoe's SMOE_REPLAY (measurement only) on
# the qwen3moe fixture, in stock llama-completion with one token a ubatch
# (-ub 1):
#  - the experts the plugin demand-prefetches, recorded by the library
#    (SMOE_TRACE), are exactly the replayed trace's (replay-3x8-top2.trace,
#    20 tokens, so a longer run wraps around it), token by token, layer by
#    layer, in rank order; with the model's own router they would not be;
#  - SMOE_STATS counts the replay's tokens (replay_tokens) and the hits'
#    own cost (hit_claims, hit_ns) apart from the misses' waits
#    (miss_wait_ns);
#  - a trace that cannot be read is refused at load, naming SMOE_REPLAY.
# Environment: as plugin_test.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${SMOE_TEST_TMPDIR:-/tmp}/plugin-replay
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
fail() { echo "FAIL replay: $*" >&2; exit 1; }
. "$here/fixture.sh"

make_fixture model qwen3moe 1 --byte-vocab
vault_sizes model.smoe
trace=$here/replay-3x8-top2.trace
run() {
    run_logged "graphs reused" run.out run.err env GGML_BACKEND_PATH="$GGML_SMOE" \
        SMOE_VAULT=model.smoe SMOE_RING_SLOTS="$quarter" "$@" "$LLAMA_COMPLETION" \
        -m model.gguf -p "replay the trace" -n 12 --temp 0 -t 2 -c 256 -b 1 -ub 1 \
        --ignore-eos -no-cnv --no-warmup -nr -ot exps=SMOE
}
run SMOE_REPLAY="$trace" SMOE_TRACE=rec.trace SMOE_STATS=stats.json ||
    { cat run.err; fail "llama-completion with SMOE_REPLAY"; }
grep -q "SMOE_REPLAY=.*routing replayed from a trace of 20 tokens, 3 layers, top-2" run.err ||
    { cat run.err; fail "no word of the replay on stderr"; }
"$SMOE_LLAMA_PY" - "$trace" rec.trace stats.json <<'PY' || fail "the experts read are not the trace's"
import json, sys
def records(path):
    return [l.split()[1:] for l in open(path) if l.strip() and not l.startswith("#")]
want, got = records(sys.argv[1]), records(sys.argv[2])
st = json.load(open(sys.argv[3]))
n = st["replay_tokens"]
# 16 prompt and generated tokens at least: the 20-token trace wraps around.
assert n > 20 and n * 3 == st["graphs"], ("replay_tokens", n, st["graphs"])
# Before the replay: the load's check of each tensor's first and last expert.
tail = got[-3 * n:]
assert len(tail) == 3 * n, (len(got), n)
for i, rec in enumerate(tail):
    exp = want[i % len(want)]
    assert rec == exp, "record %d (token %d, layer %d): read %s, the trace has %s" % (
        i, i // 3, i % 3, rec, exp)
assert st["hit_claims"] > 0 and st["hit_ns"] > 0 and st["miss_wait_ns"] > 0, st
assert st["hit_claims"] <= st["claims"] and st["copy_ns"] == 0, st
print("replayed %d tokens: %d records as the trace's; hits %d claims %d hit_ns %d miss_wait_ns %d"
      % (n, len(tail), st["hit_claims"], st["claims"], st["hit_ns"], st["miss_wait_ns"]))
PY

# A trace that cannot be read: refused at load, naming it.
if run SMOE_REPLAY=missing.trace; then fail "a missing SMOE_REPLAY trace was accepted"; fi
grep -q "SMOE_REPLAY: replay trace missing.trace" run.err ||
    { cat run.err; fail "no message naming SMOE_REPLAY and the file"; }
grep -qi "segmentation\|core dumped" run.err && fail "crash on a missing trace"
echo "PASS replay"
