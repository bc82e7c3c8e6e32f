"""The benchmark's routing override (python/bench/routing.py, behind
hf_offload.py --routing): uniform rows are seeded, in range and distinct;
traces are parsed (plain and gzip) with the format's checks and mapped
onto a model of another shape by the stated modulo rules; the router hook
replaces the indices of a router shaped like transformers 5's, keeps its
weights, and a model patched by stream_experts claims exactly the experts
the override chose and computes what the plain model computes with the
same override."""
import copy
import gzip
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import smoe_stream
from smoe_stream.hf import stream_experts
from moe_models import FusedExperts, TinyModel
from test_torch import packed

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
sys.path.insert(0, BENCH)
import routing  # noqa: E402
from routing import RoutingError, TraceRouting, Uniform, read_trace  # noqa: E402

TRACE = """# source: written for this test model=tiny
# layers=3 experts=4 topk=2
# request 0
0 0 3 1
0 1 0 2 | 3
0 2 1 0
2 0 2 3
2 2 0 1
# request 1
5 0 1 2
5 1 3 0
5 2 2 3
"""


def write(path, text, gz=False):
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


# --- uniform ---------------------------------------------------------------

def test_uniform_is_seeded_in_range_and_distinct():
    r = Uniform(4, 16, 5, seed=3)
    table = {(t, L): r.experts(t, L) for t in range(200) for L in range(4)}
    for row in table.values():
        assert len(row) == 5 and len(set(row)) == 5
        assert all(0 <= e < 16 for e in row)
    # the same seed gives the same rows, in any order of asking
    again = Uniform(4, 16, 5, seed=3)
    assert all(again.experts(t, L) == table[t, L] for t, L in reversed(list(table)))
    other = Uniform(4, 16, 5, seed=4)
    assert sum(other.experts(t, L) != table[t, L] for t, L in table) > 700
    # rows differ between tokens and layers, and every expert is drawn
    assert len({tuple(table[t, 0]) for t in range(200)}) > 190
    assert table[0, 0] != table[0, 1]
    counts = [0] * 16
    for row in table.values():
        for e in row:
            counts[e] += 1
    assert all(150 < c < 350 for c in counts), counts  # 250 each on average
    with pytest.raises(RoutingError, match="top-k"):
        Uniform(2, 4, 5)


# --- traces ----------------------------------------------------------------

def test_trace_is_parsed_plain_and_gzip(tmp):
    plain = read_trace(write(tmp / "t.trace", TRACE))
    assert (plain.layers, plain.experts, plain.topk, plain.model) == (3, 4, 2, "tiny")
    # distinct tokens in file order (0, 2, 5); the speculative part is dropped
    assert plain.rows == [{0: [3, 1], 1: [0, 2], 2: [1, 0]}, {0: [2, 3], 2: [0, 1]},
                          {0: [1, 2], 1: [3, 0], 2: [2, 3]}]
    assert not plain.truncated
    for name in ("t.trace.gz", "t.gzip-without-suffix"):
        z = read_trace(write(tmp / name, TRACE, gz=True))
        assert z.rows == plain.rows and z.layers == 3 and z.experts == 4
    two = read_trace(str(tmp / "t.trace"), max_tokens=2)
    assert two.rows == plain.rows[:2] and two.truncated
    # without a header, the shape is the largest value plus one
    bare = read_trace(write(tmp / "bare.trace", "0 0 5 1\n0 1 2 0 7\n"))
    assert (bare.layers, bare.experts, bare.topk) == (2, 8, 3)


def test_trace_replays_onto_the_same_shape(tmp):
    r = TraceRouting(read_trace(write(tmp / "t.trace", TRACE)), 3, 4, 2)
    assert [r.experts(t, 0) for t in range(3)] == [[3, 1], [2, 3], [1, 2]]
    assert r.experts(1, 1) == [0, 2]      # no line: the earlier token's
    assert r.experts(3, 0) == [3, 1]      # tokens wrap: 3 mod 3
    assert "1 of 3 tokens without a line" in r.describe()


def test_trace_modulo_onto_more_layers_and_experts(tmp):
    t = read_trace(write(tmp / "t.trace", TRACE))
    r = TraceRouting(t, 7, 16, 4)
    assert r.experts(0, 4) == [0, 2, 4, 6]  # layer 4 -> trace layer 1; rank 2, 3 + 4
    assert r.experts(0, 0) == [3, 1, 7, 5]
    for tok in range(6):
        for L in range(7):
            row = r.experts(tok, L)
            assert len(set(row)) == 4 and all(0 <= e < 16 for e in row)
            assert [e % 4 for e in row[:2]] == [e % 4 for e in row[2:]]
    assert r.reachable() == 8
    d = r.describe()
    assert "model layer L replays trace layer L mod 3" in d
    assert "at most 8 of 16 experts per layer reachable" in d
    fewer = TraceRouting(t, 2, 4, 2)
    assert "replay the trace's first 2 of 3" in fewer.describe()


def test_trace_modulo_onto_fewer_experts(tmp):
    t = read_trace(write(tmp / "t.trace", TRACE))
    r = TraceRouting(t, 3, 3, 2)
    assert r.experts(0, 0) == [0, 1]        # 3 mod 3, 1
    assert r.experts(1, 0) == [2, 0]        # 2, 3 mod 3
    two = TraceRouting(t, 3, 2, 2)
    assert two.experts(0, 0) == [1, 0]      # 3 mod 2 = 1, 1 taken: the next free
    for tok in range(3):
        for L in range(3):
            assert sorted(two.experts(tok, L)) == [0, 1]


BAD = [
    ("1 0 1 2\n0 1 1 2\n", ":2: token 0 after token 1"),
    ("0 1 1 2\n0 0 1 2\n", ":2: layer 0 after layer 1"),
    ("0 0 1 1\n", ":1: an expert repeats"),
    ("0 0 1 2 | 2\n", ":1: an expert repeats"),
    ("# layers=2\n0 2 1 0\n", ":2: layer 2: the header gives layers=2"),
    ("# experts=4\n0 0 4 1\n", ":2: expert 4: the header gives experts=4"),
    ("# topk=1\n0 0 1 2\n", ":2: 2 ranked experts: the header gives topk=1"),
    ("0 0 x\n", ":1: 'x': expected 'token layer e1 ... ek'"),
    ("0 0 -1\n", ":1: '-1': expected"),
    ("0 0\n", ":1: expected 'token layer e1 ... ek' (at least one expert)"),
    ("# layers=2\n# layers=3\n", ":2: layers=3, but an earlier line gave 2"),
    ("# topk=65\n", ":1: topk=65: expected a number from 1 to 64"),
    ("# only a comment\n", ": no records"),
]


@pytest.mark.parametrize("text,msg", BAD)
def test_bad_trace_is_a_clear_error(tmp, text, msg):
    path = write(tmp / "bad.trace", text)
    with pytest.raises(RoutingError) as e:
        read_trace(path)
    assert str(e.value).startswith(path) and msg in str(e.value), str(e.value)


def test_unreadable_trace_is_a_clear_error(tmp):
    whole = gzip.compress(TRACE.encode())
    cut = tmp / "cut.trace.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    binary = tmp / "binary.trace"
    binary.write_bytes(b"0 0 1 \xff\xfe\n")
    for path in (cut, binary, tmp / "missing.trace"):
        with pytest.raises(RoutingError, match="cannot read the trace"):
            read_trace(str(path))


def test_parse_mode(tmp):
    assert routing.parse_mode("model", 2, 8, 2) is None
    assert isinstance(routing.parse_mode("uniform", 2, 8, 2, seed=9), Uniform)
    r = routing.parse_mode("trace:" + write(tmp / "t.trace", TRACE), 2, 8, 2, max_tokens=1)
    assert len(r.trace.rows) == 1
    for bad, msg in (("bogus", "expected model, uniform or trace:FILE"),
                     ("trace:", "expected model"),
                     ("trace:" + str(tmp / "missing"), "No such file")):
        with pytest.raises(RoutingError, match=msg):
            routing.parse_mode(bad, 2, 8, 2)
    # a trace layer the model needs but no token has
    path = write(tmp / "gap.trace", "# layers=2\n0 0 1 2\n")
    with pytest.raises(RoutingError, match="no line for layer 1"):
        routing.parse_mode("trace:" + path, 2, 8, 2)


# --- the router hook -------------------------------------------------------

class TopKRouter(nn.Module):
    """Shaped like transformers 5's Qwen3-MoE router: returns the softmax
    over all experts, the normalized top-k weights and the top-k indices."""

    def __init__(self, H, E, k):
        super().__init__()
        self.top_k = k
        self.weight = nn.Parameter(torch.randn(E, H) * 0.3)

    def forward(self, h):
        h = h.reshape(-1, self.weight.shape[1])
        probs = F.softmax(F.linear(h, self.weight), dim=-1, dtype=torch.float)
        w, idx = torch.topk(probs, self.top_k, dim=-1)
        return probs, (w / w.sum(-1, keepdim=True)).to(h.dtype), idx


class Block(nn.Module):
    def __init__(self, H, I, E, k):
        super().__init__()
        self.gate = TopKRouter(H, E, k)
        self.experts = FusedExperts(H, I, E)
        self.calls = []

    def forward(self, h):
        x = h.reshape(-1, h.shape[-1])
        _, w, idx = self.gate(x)
        self.calls.append((x.detach().clone(), w.detach().clone(), idx.clone()))
        return self.experts(x, idx, w).reshape(h.shape)


def V5Model(layers=2, H=32, I=16, E=8, k=2):
    """TinyModel with transformers 5's router in each MoE block."""
    model = TinyModel("fused", layers=layers, H=H, I=I, E=E, k=k)
    for layer in model.layers:
        layer.mlp = Block(H, I, E, k)  # seeded: TinyModel seeds the generator
    return model


def run_steps(model, override=None):
    """A 3-token prefill, then two single tokens; the digest after each."""
    digests = []
    with torch.no_grad():
        for ids in ([[5, 9, 2]], [[7]], [[1]]):
            out = model(torch.tensor(ids))
            if override:
                digests.append(override.digest())
    return out, digests


def test_override_replaces_indices_and_keeps_weights():
    model = V5Model().eval()
    r = Uniform(2, 8, 2, seed=5)
    ov = routing.Override(model, r)
    assert len(ov.handles) == 2
    _, digests = run_steps(model, ov)
    assert ov.seen == {0: 5, 1: 5}
    for L, layer in enumerate(model.layers):
        block = layer.mlp
        starts = [0, 3, 4]
        for (x, w, idx), t0 in zip(block.calls, starts):
            want = torch.tensor([r.experts(t0 + t, L) for t in range(idx.shape[0])])
            assert torch.equal(idx, want)
            # the router's own weights for these rows, computed without the hook
            _, w_ref, idx_ref = block.gate.forward(x)
            assert torch.equal(w, w_ref)
            assert w.shape == idx_ref.shape
            assert torch.equal(block.experts(x, idx, w), block.experts(x, want, w_ref))
    # a second model run alike routes alike: the same digests at each step
    twin = V5Model().eval()
    ov2 = routing.Override(twin, Uniform(2, 8, 2, seed=5))
    assert run_steps(twin, ov2)[1] == digests and len(set(digests)) == 3
    ov.remove()
    before = [len(layer.mlp.calls) for layer in model.layers]
    run_steps(model)
    assert ov.seen == {0: 5, 1: 5} and [len(layer.mlp.calls) for layer in model.layers] == [
        b + 3 for b in before]


def test_override_errors():
    with pytest.raises(RoutingError, match="no MoE router"):
        routing.Override(nn.Sequential(nn.Linear(4, 4)), Uniform(1, 8, 2))
    with pytest.raises(RoutingError, match="layer 1, but the routing covers 1 layers"):
        routing.Override(V5Model(), Uniform(1, 8, 2))
    model = V5Model()
    routing.Override(model, Uniform(2, 8, 3))
    with pytest.raises(RoutingError, match="chose 2 experts per token; the routing gives 3"):
        run_steps(model)
    # a router returning logits only (transformers 4): no indices to replace
    old = TinyModel("fused", layers=1, E=8, k=2)
    routing.Override(old, Uniform(1, 8, 2))
    with pytest.raises(RoutingError, match="returned 0 integer"):
        old(torch.tensor([[1, 2]]))


def test_streamed_model_claims_the_overridden_experts(tmp):
    # The benchmark's two sides: the model as it is, and patched by
    # stream_experts; the same override gives both the same routing.
    model = V5Model(layers=2, E=8, k=2).eval()
    vault = packed(tmp, model)
    plain = copy.deepcopy(model)
    r = Uniform(2, 8, 2, seed=21)
    want, want_d = run_steps(plain, routing.Override(plain, r))
    h = stream_experts(model, vault, workers=2, flags=smoe_stream.OPEN_ALLOW_BUFFERED |
                       smoe_stream.OPEN_NO_PREWARM)
    try:
        claimed = []
        before = h.stats()["claims"]  # stream_experts claimed each layer's layout
        real = h.stream.claim
        h.stream.claim = lambda l, e, timeout=None: claimed.append((l, e)) or real(l, e)
        got, got_d = run_steps(model, routing.Override(model, Uniform(2, 8, 2, seed=21)))
        assert got_d == want_d
        assert torch.equal(got, want)
        chosen = {(L, e) for t in range(5) for L in range(2) for e in r.experts(t, L)}
        assert set(claimed) == chosen
        st = h.stats()
        assert st["claims"] - before == len(claimed)
    finally:
        h.close()


# --- hf_offload.py --check-routing -----------------------------------------

def check(*args):
    return subprocess.run([sys.executable, os.path.join(BENCH, "hf_offload.py"),
                           "--check-routing"] + list(args), capture_output=True, text=True)


def test_check_routing_prints_the_first_tokens(tmp):
    p = check("2", "--layers", "3", "--routing", "uniform", "--routing-seed", "7")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("model: 3 layers x 128 experts, top-8")
    assert "uniform" in lines[1] and "seed 7" in lines[1]
    rows = [ln for ln in lines if ln.startswith("token ")]
    assert len(rows) == 6
    want = Uniform(3, 128, 8, seed=7).experts(1, 2)
    assert rows[-1] == "token 1 layer 2: " + " ".join(map(str, want))

    path = write(tmp / "t.trace.gz", TRACE, gz=True)
    p = check("1", "--layers", "5", "--routing", "trace:" + path)
    assert p.returncode == 0, p.stderr
    assert "model layer L replays trace layer L mod 3" in p.stdout
    assert "token 0 layer 3: 3 1 7 5 11 9 15 13" in p.stdout  # trace layer 0

    p = check("--routing", "trace:" + str(tmp / "missing.trace"))
    assert p.returncode != 0 and "missing.trace" in p.stderr
