"""The trained fixture (tests/fixtures/trained) for the tests: its tensors
read from safetensors and GGUF by plain parsers written for these tests, and
a plain-PyTorch Qwen3-MoE forward under transformers 5's module names
(model.layers.N.mlp.gate / .experts with fused gate_up_proj, down_proj),
float32 on the CPU, which reproduces transformers' logits of the fixture
(reference.npz) and which stream_experts patches as it patches
transformers' own model."""
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from moe_models import FusedExperts

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                       "fixtures", "trained")


def fixture(name):
    return os.path.join(FIXTURE, name)


def safetensors_tensors(path):
    """{name: (dtype, shape, raw bytes)}."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    base = 8 + n
    return {k: (v["dtype"], tuple(v["shape"]),
                data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in head.items() if k != "__metadata__"}


# GGUF value types with a fixed size, and ggml tensor types: bytes per block, block
_GGUF_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGML = {0: (4, 1), 1: (2, 1), 8: (34, 32), 30: (2, 1)}  # f32, f16, q8_0, bf16


def gguf_tensors(path):
    """{name: (ggml type, dims innermost first, raw bytes)}."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:4] == b"GGUF", path
    pos = 8
    n_t, n_kv = struct.unpack_from("<QQ", b, pos)
    pos += 16

    def string(p):
        n = struct.unpack_from("<Q", b, p)[0]
        return b[p + 8:p + 8 + n].decode(), p + 8 + n

    def skip(t, p):
        if t in _GGUF_FIXED:
            return p + _GGUF_FIXED[t]
        if t == 8:
            return string(p)[1]
        assert t == 9, "GGUF value type %d" % t
        et, n = struct.unpack_from("<IQ", b, p)
        p += 12
        for _ in range(n):
            p = skip(et, p)
        return p

    align = 32
    for _ in range(n_kv):
        key, pos = string(pos)
        t = struct.unpack_from("<I", b, pos)[0]
        if key == "general.alignment":
            align = struct.unpack_from("<I", b, pos + 4)[0]
        pos = skip(t, pos + 4)
    infos = []
    for _ in range(n_t):
        name, pos = string(pos)
        nd = struct.unpack_from("<I", b, pos)[0]
        dims = struct.unpack_from("<%dQ" % nd, b, pos + 4)
        typ, off = struct.unpack_from("<IQ", b, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, typ, dims, off))
    base = (pos + align - 1) // align * align
    out = {}
    for name, typ, dims, off in infos:
        per, blk = _GGML[typ]
        n = int(np.prod(dims))
        out[name] = (typ, dims, b[base + off:base + off + n // blk * per])
    return out


def _bf16(raw, shape):
    a = np.frombuffer(raw, dtype=np.int16).copy()
    return torch.from_numpy(a).view(torch.bfloat16).reshape(shape).float()


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.variance_epsilon = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.variance_epsilon))


class Router(nn.Module):
    """transformers 5's top-k router: (logits, top-k weights, top-k ids)."""

    def __init__(self, H, E, k):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(E, H))
        self.top_k = k

    def forward(self, x):
        logits = F.linear(x, self.weight)
        p = F.softmax(logits, dim=-1, dtype=torch.float)
        w, idx = torch.topk(p, self.top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        return logits, w.to(x.dtype), idx


class SparseMoe(nn.Module):
    def __init__(self, H, I, E, k):
        super().__init__()
        self.gate = Router(H, E, k)
        self.experts = FusedExperts(H, I, E)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        _, w, idx = self.gate(x)
        return self.experts(x, idx, w).reshape(shape)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, d = c["hidden_size"], c["head_dim"]
        self.nh, self.nkv, self.d = c["num_attention_heads"], c["num_key_value_heads"], d
        self.q_proj = nn.Linear(H, self.nh * d, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * d, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * d, bias=False)
        self.o_proj = nn.Linear(self.nh * d, H, bias=False)
        self.q_norm = RMSNorm(d, c["rms_norm_eps"])
        self.k_norm = RMSNorm(d, c["rms_norm_eps"])
        theta = c.get("rope_parameters", {}).get("rope_theta", c.get("rope_theta", 10000.0))
        self.inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float) / d)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        past = cache[0].shape[2] if cache else 0
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.d)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.d)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.d).transpose(1, 2)
        f = torch.arange(past, past + T, dtype=torch.float)[:, None] * self.inv_freq[None]
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if cache is not None:  # decoding: keys and values of earlier positions
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / self.d ** 0.5
        S = past + T
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(past + 1), float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.input_layernorm = RMSNorm(H, c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(H, c["rms_norm_eps"])
        self.mlp = SparseMoe(H, c["moe_intermediate_size"], c["num_experts"],
                             c["num_experts_per_tok"])

    def forward(self, x, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Config:
    def __init__(self, c):
        self.num_experts_per_tok = c["num_experts_per_tok"]
        self.num_hidden_layers = c["num_hidden_layers"]


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Qwen3Moe(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = Config(c)
        self.model = Inner(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids, caches=None):
        """caches: a list per layer (empty at the start) to decode with."""
        x = self.model.embed_tokens(ids)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, caches[i] if caches is not None else None)
        return self.lm_head(self.model.norm(x))


def load_fixture(path=FIXTURE):
    """The fixture (or another checkpoint directory of the kind) as
    Qwen3Moe, float32 (its bf16 weights widened)."""
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    c.setdefault("num_experts", c.get("num_local_experts"))
    m = Qwen3Moe(c)
    ts = safetensors_tensors(os.path.join(path, "model.safetensors"))
    E = c["num_experts"]
    state = {}
    for k, (dt, shape, raw) in ts.items():
        assert dt == "BF16", (k, dt)
        if ".mlp.experts." in k:
            continue
        state[k] = _bf16(raw, shape)
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d.mlp.experts." % i

        def w(e, n):
            dt, shape, raw = ts["%s%d.%s.weight" % (p, e, n)]
            return _bf16(raw, shape)
        state[p + "gate_up_proj"] = torch.stack(
            [torch.cat([w(e, "gate_proj"), w(e, "up_proj")], 0) for e in range(E)])
        state[p + "down_proj"] = torch.stack([w(e, "down_proj") for e in range(E)])
    missing, unexpected = m.load_state_dict(state, strict=False)
    assert not unexpected and not [k for k in missing if "inv_freq" not in k], (missing, unexpected)
    return m.eval()


def held_out_text(n):
    """n bytes of text the fixture never saw: this project's own source."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "smoe_stream",
                        "stream.py")
    with open(path, "rb") as f:
        return f.read(n)
