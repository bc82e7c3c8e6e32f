"""smoe_stream.hf.stream_experts on models shaped like transformers' MoE
models (transformers itself is not installed here; the H200 run in
docs/python.md covers the real architectures). Each model is saved as a
checkpoint under transformers' names, packed with `smoe pack`, patched in
place, and must give the same logits bit for bit."""
import pytest
import torch

import smoe_stream
from smoe_stream.hf import stream_experts
from moe_models import TinyModel
from test_torch import packed


def greedy(model, ids, steps):
    ids = ids.clone()
    logits = []
    for _ in range(steps):
        out = model(ids)
        logits.append(out[:, -1])
        ids = torch.cat([ids, out[:, -1].argmax(-1, keepdim=True)], 1)
    return ids, torch.stack(logits)


CASES = [
    ("list", {}),                          # transformers 4: experts.N.gate_proj
    ("mixtral4", {}),                      # transformers 4 Mixtral: block_sparse_moe.experts.N.w1
    ("fused", {"split_fused": True}),      # transformers 5 in memory, saved per expert
    ("fused", {}),                         # transformers 5, saved fused (experts.gate_up_proj)
    ("gptoss", {}),                        # transposed, interleaved, biases
    ("llama4", {}),                        # dense bmm over every expert
]


@pytest.mark.parametrize("kind,kw", CASES, ids=[c[0] + ("-split" if c[1] else "")
                                                for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_patched_model_equals_original(tmp, kind, kw, dtype):
    model = TinyModel(kind, layers=3, E=8, k=2, dtype=dtype).eval()
    vault = packed(tmp, model, **kw)
    torch.manual_seed(11)
    prompt = torch.randint(0, 64, (2, 6))
    with torch.no_grad():
        want_ids, want = greedy(model, prompt, 6)
    expert_bytes = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    assert expert_bytes > 0

    h = stream_experts(model, vault, workers=2,
                       flags=smoe_stream.OPEN_ALLOW_BUFFERED | smoe_stream.OPEN_NO_PREWARM)
    try:
        assert len(h.patched) == 3 and [p.layer for p in h.patched] == [0, 1, 2]
        left = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
        assert left == 0  # the expert parameters are freed
        with torch.no_grad():
            got_ids, got = greedy(model, prompt, 6)
        assert torch.equal(got_ids, want_ids)
        assert torch.equal(got, want), (got - want).abs().max()
        st = h.stats()
        assert st["claims"] > 0 and st["slots_referenced"] == 0
    finally:
        h.close()


def test_prefetches_before_the_first_expert(tmp):
    # Per-expert lists: the router hook asks for every chosen expert of the
    # layer before the first expert runs.
    model = TinyModel("list", layers=1, E=8, k=2).eval()
    vault = packed(tmp, model)
    h = stream_experts(model, vault, flags=smoe_stream.OPEN_ALLOW_BUFFERED |
                       smoe_stream.OPEN_NO_PREWARM)
    calls = []
    real = h.stream.prefetch
    h.stream.prefetch = lambda l, e, spec=False: calls.append(("prefetch", e)) or real(l, e,
                                                                                      spec)
    real_claim = h.stream.claim
    h.stream.claim = lambda l, e, timeout=None: calls.append(("claim", e)) or real_claim(l, e)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]))
    first_claim = [c[0] for c in calls].index("claim")
    chosen = {e for op, e in calls if op == "claim"}
    assert chosen <= {e for op, e in calls[:first_claim] if op == "prefetch"}
    h.close()


def test_shape_mismatch_is_a_clear_error(tmp):
    small = TinyModel("fused", layers=2, H=32, I=16, E=8).eval()
    vault = packed(tmp, small)
    other = TinyModel("fused", layers=2, H=32, I=8, E=8).eval()
    with pytest.raises(smoe_stream.InvalidArgument) as ei:
        stream_experts(other, vault, flags=smoe_stream.OPEN_ALLOW_BUFFERED)
    msg = str(ei.value)
    assert "layers.0.mlp.experts.gate_up_proj" in msg and "[16, 32]" in msg, msg


def test_model_without_experts(tmp):
    model = TinyModel("list", layers=1).eval()
    vault = packed(tmp, model)
    with pytest.raises(smoe_stream.NotSupported):
        stream_experts(torch.nn.Linear(3, 3), vault, flags=smoe_stream.OPEN_ALLOW_BUFFERED)
