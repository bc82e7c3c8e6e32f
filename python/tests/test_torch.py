"""smoe_stream.torch against plain-PyTorch MoE layers: the streamed experts
give the same output bit for bit on the CPU, with the checkpoint packed by
`smoe pack`."""
import json

import pytest
import torch

import smoe_stream
from smoe_stream.torch import ExpertStore, StreamedMoE, swiglu_expert
from conftest import open_stream, pack, save_safetensors
from moe_models import TinyModel, checkpoint, route_softmax


def packed(tmp, model, name="m", **kw):
    d = tmp / name
    d.mkdir()
    save_safetensors(str(d / "model.safetensors"), checkpoint(model, **kw))
    (d / "config.json").write_text(json.dumps({"model_type": model.config.model_type,
                                               "num_experts_per_tok":
                                               model.config.num_experts_per_tok}))
    out = tmp / (name + ".smoe")
    pack(d, out)
    return str(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_streamed_moe_equals_plain_layer(tmp, dtype):
    model = TinyModel("list", layers=3, E=8, k=2, dtype=dtype)
    vault = packed(tmp, model)
    torch.manual_seed(7)
    x = torch.randn(5, 7, 32).to(dtype)
    with open_stream(vault) as s:
        assert s.meta("top_k") == "2"
        store = ExpertStore(s)
        for L, layer in enumerate(model.layers):
            block = layer.mlp
            flat = x.reshape(-1, 32)
            w, idx = route_softmax(block.gate(flat), block.top_k, flat.dtype)
            want = block(x).reshape(-1, 32)
            got = StreamedMoE(store, L)(flat, idx, w)
            assert got.dtype == dtype
            assert torch.equal(got, want), (L, (got - want).abs().max())
        st = s.stats()
        assert st["claims"] > 0 and st["releases"] == st["claims"]


def test_store_views_are_the_checkpoint_weights(tmp):
    model = TinyModel("list", layers=2, E=4, k=2, dtype=torch.bfloat16)
    vault = packed(tmp, model)
    with open_stream(vault) as s:
        store = ExpertStore(s)
        got = list(store.stream_layer(1, [3, 0, 2]))
        assert [e for e, _ in got] == [3, 0, 2]
        for e in (0, 3):
            with store.expert(1, e) as w:
                ex = model.layers[1].mlp.experts[e]
                assert set(w) == {"gate", "up", "down"}
                assert torch.equal(w["gate"], ex.gate_proj.weight)
                assert torch.equal(w["up"], ex.up_proj.weight)
                assert torch.equal(w["down"], ex.down_proj.weight)
                assert w["gate"].dtype == torch.bfloat16
        assert s.stats()["slots_referenced"] == 0  # everything released


def test_small_ring_prefill_uses_every_expert(tmp):
    # 16 tokens choose (nearly) all 8 experts; the ring holds 4 slots.
    model = TinyModel("list", layers=2, E=8, k=4)
    vault = packed(tmp, model)
    torch.manual_seed(3)
    x = torch.randn(16, 32)
    with open_stream(vault, ring_slots=4) as s:
        store = ExpertStore(s)
        block = model.layers[0].mlp
        w, idx = route_softmax(block.gate(x), 4, x.dtype)
        assert len(torch.unique(idx)) > 4
        assert torch.equal(StreamedMoE(store, 0)(x, idx, w), block(x))
        assert s.stats()["evictions"] > 0


def test_custom_expert_fn(tmp):
    model = TinyModel("list", layers=1, E=4, k=1)
    vault = packed(tmp, model)
    seen = []

    def fn(x, w):
        seen.append(sorted(w))
        return swiglu_expert(x, w, act=torch.nn.functional.gelu)

    with open_stream(vault) as s:
        x = torch.randn(3, 32)
        idx = torch.tensor([[1], [1], [3]])
        out = StreamedMoE(ExpertStore(s), 0, fn)(x, idx, torch.ones(3, 1))
    ex = model.layers[0].mlp.experts[1]
    want = ex.down_proj(torch.nn.functional.gelu(ex.gate_proj(x[:2])) * ex.up_proj(x[:2]))
    assert torch.equal(out[:2], want)
    assert seen == [["down", "gate", "up"]] * 2
