"""The trained fixture (tests/fixtures/trained: a byte-level Qwen3-MoE
trained on Python sources; bench/trained/README.md): packed from each of its
three forms, every expert read back byte for byte against the source
tensors; the plain forward of qwen3_moe.py reproducing transformers' logits;
stream_experts bit-identical to the unpatched model, with and without the
lookahead; the lookahead's recall on held-out text."""
import numpy as np
import pytest
import torch

import smoe_stream
from smoe_stream.hf import stream_experts

from conftest import pack
from qwen3_moe import fixture, gguf_tensors, held_out_text, load_fixture, safetensors_tensors

FLAGS = smoe_stream.OPEN_ALLOW_BUFFERED | smoe_stream.OPEN_NO_PREWARM
PROJ = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def _source_bytes(form, layer, expert, comp):
    """Expert (layer, expert)'s component comp in the fixture's file."""
    if form == "model.safetensors":
        return _ST[0]["model.layers.%d.mlp.experts.%d.%s.weight" % (layer, expert, PROJ[comp])][2]
    _, dims, raw = _GG[form]["blk.%d.ffn_%s_exps.weight" % (layer, comp)]
    per = len(raw) // dims[-1]
    return raw[expert * per:(expert + 1) * per]


_ST = []
_GG = {}


@pytest.mark.parametrize("form", ["model-bf16.gguf", "model-q8_0.gguf", "model.safetensors"])
def test_trained_pack_reads_back_every_expert(tmp, form):
    if not _ST:
        _ST.append(safetensors_tensors(fixture("model.safetensors")))
    if form.endswith(".gguf") and form not in _GG:
        _GG[form] = gguf_tensors(fixture(form))
    vault = tmp / "v.smoe"
    pack(fixture(form), vault)
    seen = 0
    with smoe_stream.Stream(str(vault), flags=FLAGS, ring_slots=8) as s:
        assert (s.layers, s.experts) == (6, 16)
        for layer in range(6):
            for e in range(16):
                with s.claim(layer, e) as b:
                    names = sorted(c.name for c in b.components)
                    assert names == ["down", "gate", "up"], names
                    buf = bytes(b.buffer)
                    for c in b.components:
                        want = _source_bytes(form, layer, e, c.name)
                        got = buf[c.offset:c.offset + c.nbytes]
                        assert got == want, "%s: layer %d expert %d %s differs" % (
                            form, layer, e, c.name)
                seen += 1
    assert seen == 96


def test_trained_plain_forward_matches_transformers():
    # reference.npz: transformers 5.17's float32 CPU logits of a held-out
    # prompt (bench/trained/train.py); the plain forward here must agree to
    # float32 rounding (the routing of every token the same)
    ref = np.load(fixture("reference.npz"))
    m = load_fixture()
    with torch.no_grad():
        got = m(torch.from_numpy(ref["ids"].astype("int64"))[None])[0].numpy()
    assert np.abs(got - ref["logits"]).max() < 0.05
    assert (got.argmax(1) == ref["logits"].argmax(1)).all()


def _prompt(n):
    return torch.tensor(list(held_out_text(n)), dtype=torch.long)[None]


@pytest.mark.parametrize("lookahead", [False, True])
@pytest.mark.parametrize("slots", [96, 24, 4])
def test_trained_stream_experts_equal_unpatched(tmp, lookahead, slots):
    model = load_fixture()
    prompt = _prompt(96)
    with torch.no_grad():
        want = model(prompt)
    vault = tmp / "v.smoe"
    pack(fixture("model.safetensors"), vault)
    h = stream_experts(model, str(vault), lookahead=lookahead, workers=2, ring_slots=slots,
                       flags=FLAGS)
    try:
        with torch.no_grad():
            got = model(prompt)
        assert torch.equal(got, want), (got - want).abs().max()
        st = h.stats()
        assert st["claims"] > 0
        if lookahead:
            assert st["lookahead_layers"] == 5  # layers 1..5, one prompt
            assert st["lookahead_hints"] > 0
            assert 0 <= st["lookahead_recall"] <= 1
        else:
            assert "lookahead_recall" not in st
    finally:
        h.close()


def test_trained_lookahead_recall_on_held_out_text(tmp):
    # each token's guess for layer L+1 against the experts L+1 then chose:
    # chance is top_k / experts = 4 / 16
    model = load_fixture()
    vault = tmp / "v.smoe"
    pack(fixture("model.safetensors"), vault)
    h = stream_experts(model, str(vault), lookahead=True, workers=2, ring_slots=24, flags=FLAGS)
    try:
        with torch.no_grad():
            model(_prompt(512))
        st = h.stats()
        assert st["lookahead_demanded"] == 512 * 5 * 4
        assert st["lookahead_recall"] >= 0.5, st["lookahead_recall"]
        assert st["prefetch_hint"] > 0 if "prefetch_hint" in st else True
    finally:
        h.close()
