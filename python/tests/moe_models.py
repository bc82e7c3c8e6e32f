"""Plain-PyTorch MoE layers for the tests, in the shapes transformers uses:
per-expert module lists (transformers 4), fused 3-D expert parameters with a
routed forward (transformers 5), transposed fused experts with biases and an
interleaved gate/up (gpt-oss), and a dense forward over every expert's rows
(Llama 4). Written for these tests; each is the plain computation of its
kind, which the streamed versions must reproduce bit for bit."""
import torch
import torch.nn.functional as F
from torch import nn


def route_softmax(logits, k, dtype):
    w = F.softmax(logits, dim=-1, dtype=torch.float)
    w, idx = torch.topk(w, k, dim=-1)
    w = w / w.sum(dim=-1, keepdim=True)
    return w.to(dtype), idx


class ListExpert(nn.Module):
    def __init__(self, H, I, names):
        super().__init__()
        self.names = names
        g, u, d = names
        setattr(self, g, nn.Linear(H, I, bias=False))
        setattr(self, u, nn.Linear(H, I, bias=False))
        setattr(self, d, nn.Linear(I, H, bias=False))

    def forward(self, x):
        g, u, d = (getattr(self, n) for n in self.names)
        return d(F.silu(g(x)) * u(x))


class ListMoE(nn.Module):
    """transformers 4's sparse MoE block: router, then experts one by one."""

    def __init__(self, H, I, E, k, names=("gate_proj", "up_proj", "down_proj")):
        super().__init__()
        self.top_k, self.num_experts = k, E
        self.gate = nn.Linear(H, E, bias=False)
        self.experts = nn.ModuleList([ListExpert(H, I, names) for _ in range(E)])

    def forward(self, h):
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        w, idx = route_softmax(self.gate(x), self.top_k, x.dtype)
        out = torch.zeros_like(x)
        mask = F.one_hot(idx, num_classes=self.num_experts).permute(2, 1, 0)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            pos, tok = torch.where(mask[e].squeeze(0))
            y = self.experts[int(e)](x[tok]) * w[tok, pos, None]
            out.index_add_(0, tok, y.to(x.dtype))
        return out.reshape(shape)


class FusedExperts(nn.Module):
    """transformers 5's fused experts: gate_up_proj [E, 2I, H], down_proj
    [E, H, I]; forward(hidden, top_k_index, top_k_weights)."""

    def __init__(self, H, I, E):
        super().__init__()
        self.num_experts = E
        self.gate_up_proj = nn.Parameter(torch.randn(E, 2 * I, H) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(E, H, I) * 0.1)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            if e == self.num_experts:
                continue
            pos, tok = torch.where(mask[e])
            x = hidden_states[tok]
            gate, up = F.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(F.silu(gate) * up, self.down_proj[e]) * top_k_weights[tok, pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out


class TransposedExperts(nn.Module):
    """gpt-oss's layout: gate_up_proj [E, H, 2I] with gate and up
    interleaved, down_proj [E, I, H], both with biases."""

    def __init__(self, H, I, E):
        super().__init__()
        self.num_experts = E
        self.gate_up_proj = nn.Parameter(torch.randn(E, H, 2 * I) * 0.1)
        self.gate_up_proj_bias = nn.Parameter(torch.randn(E, 2 * I) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(E, I, H) * 0.1)
        self.down_proj_bias = nn.Parameter(torch.randn(E, H) * 0.1)

    def forward(self, hidden_states, router_indices=None, routing_weights=None):
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = F.one_hot(router_indices, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            pos, tok = torch.where(mask[e])
            gu = hidden_states[tok] @ self.gate_up_proj[e] + self.gate_up_proj_bias[e]
            gate, up = gu[..., ::2].clamp(max=7.0), gu[..., 1::2].clamp(-7.0, 7.0)
            h = (up + 1) * (gate * torch.sigmoid(gate * 1.702))
            y = (h @ self.down_proj[e] + self.down_proj_bias[e]) * routing_weights[tok, pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out


class RoutedMoE(nn.Module):
    def __init__(self, experts, H, E, k, router_bias=False):
        super().__init__()
        self.top_k = k
        self.gate = nn.Linear(H, E, bias=router_bias)
        self.experts = experts

    def forward(self, h):
        shape = h.shape
        x = h.reshape(-1, shape[-1])
        w, idx = route_softmax(self.gate(x), self.top_k, x.dtype)
        if isinstance(self.experts, TransposedExperts):  # as gpt-oss calls it: by keyword
            return self.experts(x, router_indices=idx, routing_weights=w).reshape(shape)
        return self.experts(x, idx, w).reshape(shape)


class DenseExperts(nn.Module):
    """Llama 4's experts: every expert over its own [T, H] rows with bmm."""

    def __init__(self, H, I, E):
        super().__init__()
        self.num_experts, self.hidden_size = E, H
        self.gate_up_proj = nn.Parameter(torch.randn(E, H, 2 * I) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(E, I, H) * 0.1)

    def forward(self, hidden_states):
        x = hidden_states.view(self.gate_up_proj.shape[0], -1, self.hidden_size)
        gate, up = torch.bmm(x, self.gate_up_proj).chunk(2, dim=-1)
        return torch.bmm(up * F.silu(gate), self.down_proj).view(-1, self.hidden_size)


class DenseMoE(nn.Module):
    def __init__(self, H, I, E, k):
        super().__init__()
        self.top_k, self.hidden_dim = k, H
        self.router = nn.Linear(H, E, bias=False)
        self.experts = DenseExperts(H, I, E)

    def forward(self, h):
        shape = h.shape
        x = h.reshape(-1, self.hidden_dim)
        logits = self.router(x)
        top, idx = torch.topk(logits, self.top_k, dim=1)
        scores = torch.full_like(logits, float("-inf")).scatter_(1, idx, top)
        scores = torch.sigmoid(scores.float()).to(x.dtype)
        routed = x.repeat(scores.shape[1], 1) * scores.transpose(0, 1).reshape(-1, 1)
        out = self.experts(routed).reshape(scores.shape[1], -1, self.hidden_dim).sum(dim=0)
        return out.reshape(shape)


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Layer(nn.Module):
    def __init__(self, block, attr):
        super().__init__()
        setattr(self, attr, block)
        self.attr = attr

    def forward(self, x):
        return x + getattr(self, self.attr)(x)


class TinyModel(nn.Module):
    """Embedding, MoE layers with residuals, a head; names like a decoder's
    (layers.N.mlp.experts...)."""

    def __init__(self, kind, layers=3, H=32, I=16, E=8, k=2, vocab=64, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(1234)
        self.config = Config(num_experts_per_tok=k, model_type=kind)
        self.embed = nn.Embedding(vocab, H)
        blocks = []
        for _ in range(layers):
            if kind == "list":
                blocks.append(Layer(ListMoE(H, I, E, k), "mlp"))
            elif kind == "mixtral4":
                blocks.append(Layer(ListMoE(H, I, E, k, ("w1", "w3", "w2")),
                                    "block_sparse_moe"))
            elif kind == "fused":
                blocks.append(Layer(RoutedMoE(FusedExperts(H, I, E), H, E, k), "mlp"))
            elif kind == "gptoss":
                blocks.append(Layer(RoutedMoE(TransposedExperts(H, I, E), H, E, k, True),
                                    "mlp"))
            elif kind == "llama4":
                blocks.append(Layer(DenseMoE(H, I, E, 1), "feed_forward"))
            else:
                raise ValueError(kind)
        self.layers = nn.ModuleList(blocks)
        self.head = nn.Linear(H, vocab, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0, 0.2)
        self.to(dtype)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def checkpoint(model, split_fused=False):
    """The model's tensors under checkpoint names. split_fused writes fused
    gate_up_proj [E, 2I, H] as per-expert gate_proj/up_proj/down_proj
    tensors, as transformers 5 saves a Qwen-style model."""
    out = {}
    for name, t in model.state_dict().items():
        key = "model." + name
        if split_fused and name.endswith("experts.gate_up_proj"):
            base = key[:-len("gate_up_proj")]
            I = t.shape[1] // 2
            for e in range(t.shape[0]):
                out["%s%d.gate_proj.weight" % (base, e)] = t[e, :I].clone()
                out["%s%d.up_proj.weight" % (base, e)] = t[e, I:].clone()
        elif split_fused and name.endswith("experts.down_proj"):
            base = key[:-len("down_proj")]
            for e in range(t.shape[0]):
                out["%s%d.down_proj.weight" % (base, e)] = t[e].clone()
        else:
            out[key] = t
    return out
