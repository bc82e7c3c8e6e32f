"""stream_experts: serve a transformers model's MoE experts from a vault.

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    smoe_stream.hf.stream_experts(model, "model.smoe")
    model.generate(...)                 # unchanged

Each MoE block's `experts` module is patched in place and its expert
parameters are freed (replaced by empty tensors). At each call the experts
the router chose are claimed from the stream, their tensors are put into
the module where its parameters were, and transformers' own expert code
runs on them: the results do not depend on a second implementation.

Two forms of experts are handled:
- the fused 3-D parameters of transformers 5 (`experts.gate_up_proj`
  [E, 2I, H] or transposed, `down_proj`, optional biases), with a
  forward(hidden_states, top_k_index, top_k_weights) (Mixtral, Qwen2/3-MoE,
  OLMoE, DeepSeek-V3, GLM-4-MoE, gpt-oss, ...), or a forward(hidden_states)
  over every expert's rows (Llama 4's dense bmm): the chosen experts are
  gathered into a compact [n, ...] tensor, the routing indices are renumbered
  0..n-1 in the same order, and the module runs with num_experts = n;
- a ModuleList of per-expert modules (transformers 4 and other engines):
  each expert's Linear weights are swapped in for the call; a hook on the
  block's router prefetches the layer's chosen experts before the first runs.

On a GPU the ring is registered with cudaHostRegister and experts are copied
with non_blocking copies; the blob is released once its copy has landed.
"""
import inspect
import re

import torch

from .errors import InvalidArgument, NotSupported, codes
from .stream import Stream
from .torch import ExpertStore

# Parameter names as transformers spells them, to the vault's component names
# (those `smoe pack` gives; docs/packing.md).
FUSED = {"gate_up_proj": "gate_up", "gate_up_proj_bias": "gate_up.bias", "gate_proj": "gate",
         "up_proj": "up", "down_proj": "down", "down_proj_bias": "down.bias",
         "input_linear": "gate_up", "output_linear": "down"}
PER_EXPERT = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate",
              "w3": "up", "w2": "down"}

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def _fail(msg):
    return InvalidArgument(codes["SMOE_EINVAL"], msg)


def _placeholder(t):
    """An empty parameter where an expert weight was: model.parameters(),
    .dtype and .device still answer; the memory is freed."""
    return torch.nn.Parameter(t, requires_grad=False)


class _Source:
    """Where one per-expert tensor of the model comes from in a blob layout:
    one component, its transpose, or two components concatenated along dim
    0 (gate then up: a checkpoint with separate gate and up, a model with
    fused gate_up)."""

    def __init__(self, stream, layout, comp, shape, where):
        cs = {c.name: c for c in stream.layout(layout)}
        shape = tuple(shape)
        self.kind = None
        c = cs.get(comp)
        if c is not None and c.shape == shape:
            self.kind, self.names = "same", (comp,)
        elif c is not None and len(shape) == 2 and c.shape == shape[::-1]:
            self.kind, self.names = "t", (comp,)
        elif comp.startswith("gate_up") and "gate" + comp[7:] in cs and "up" + comp[7:] in cs:
            g, u = cs["gate" + comp[7:]], cs["up" + comp[7:]]
            if g.shape == u.shape and (2 * g.shape[0],) + g.shape[1:] == shape:
                self.kind, self.names = "cat0", (g.name, u.name)
                # adjacent in the blob: one view, one copy
                self.adjacent = u.offset == g.offset + g.nbytes and u.dtype == g.dtype
        if self.kind is None:
            have = ", ".join("%s %s" % (c.name, list(c.shape)) for c in cs.values())
            raise _fail("%s: needs component %r of shape %s per expert; blob layout %d of %s "
                        "has %s" % (where, comp, list(shape), layout, stream.path, have))

    def view(self, w):
        """A CPU tensor for this source from a blob's views (a copy only for
        a concatenation of parts that are not adjacent)."""
        if self.kind == "same":
            return w[self.names[0]]
        if self.kind == "t":
            return w[self.names[0]].t()
        g, u = w[self.names[0]], w[self.names[1]]
        if self.adjacent:
            n = g.numel()
            return torch.as_strided(g, (2 * g.shape[0],) + tuple(g.shape[1:]), g.stride(),
                                    g.storage_offset()) if n else g
        return torch.cat([g, u], 0)

    def copy_into(self, dst, w, non_blocking):
        if self.kind == "cat0" and not self.adjacent:
            h = dst.shape[0] // 2
            dst[:h].copy_(w[self.names[0]], non_blocking=non_blocking)
            dst[h:].copy_(w[self.names[1]], non_blocking=non_blocking)
        else:
            dst.copy_(self.view(w), non_blocking=non_blocking)


class _Patched:
    def __init__(self, handle, name, module, layer):
        self.h, self.name, self.module, self.layer = handle, name, module, layer
        self.sources = {}  # layout -> {param: _Source}

    def plan(self, layout):
        s = self.sources.get(layout)
        if s is None:
            s = {p: _Source(self.h.stream, layout, comp, shape, "%s.%s" % (self.name, p))
                 for p, (comp, shape, _) in self.params.items()}
            self.sources[layout] = s
        return s


class _Fused(_Patched):
    """Experts as 3-D parameters [E, ...] of one module."""

    def __init__(self, handle, name, module, layer, device):
        super().__init__(handle, name, module, layer)
        self.params = {}
        n_exp = None
        for p, t in list(module.named_parameters(recurse=False)):
            if p not in FUSED:
                continue
            if n_exp is None:
                n_exp = t.shape[0]
            elif t.shape[0] != n_exp:
                raise _fail("%s.%s: %d experts, the module's other parameters have %d"
                            % (name, p, t.shape[0], n_exp))
            self.params[p] = (FUSED[p], tuple(t.shape[1:]), t.dtype)
        self.num_experts = n_exp
        self.device = device
        self.plan(handle.layout_of(layer))  # check shapes now, not at the first token
        for p in self.params:
            module._parameters[p] = _placeholder(torch.empty(0, dtype=self.params[p][2],
                                                             device=device))
        self.orig = module.forward
        self.sig = inspect.signature(self.orig)
        pos = [q.name for q in self.sig.parameters.values()
               if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
        dense = len(pos) == 1 and not any(q.kind == q.VAR_POSITIONAL
                                          for q in self.sig.parameters.values())
        # forward(hidden_states, <indices>, <weights>, ...): the indices'
        # name, whether they come by position or keyword (gpt-oss:
        # router_indices, the others: top_k_index)
        self.index_arg = pos[1] if len(pos) > 1 else None
        module.forward = self.forward_dense if dense else self.forward_routed

    def gather(self, ids):
        """The chosen experts' parameters as compact [n, ...] tensors on the
        module's device, experts in the order given."""
        n = len(ids)
        nb = self.device.type == "cuda"
        out = {p: torch.empty((n,) + shape, dtype=dt, device=self.device)
               for p, (_, shape, dt) in self.params.items()}
        for j, (e, w) in enumerate(self.h.store.stream_layer(self.layer, ids)):
            plan = self.plan(w.layout)
            for p, src in plan.items():
                src.copy_into(out[p][j], w, nb)
        return out

    def run(self, ids, call):
        tensors = self.gather(ids)
        if self.h.lookahead is not None:
            self.h.lookahead.after_demand(self.layer)
        m = self.module
        had_n = "num_experts" in m.__dict__
        old_n = m.__dict__.get("num_experts")
        saved = {p: m._parameters[p] for p in self.params}
        try:
            for p, t in tensors.items():
                m._parameters[p] = t
            m.num_experts = len(ids)
            return call()
        finally:
            for p, t in saved.items():
                m._parameters[p] = t
            if had_n:
                m.num_experts = old_n
            else:
                m.__dict__.pop("num_experts", None)
            self.h.store.reap()

    def forward_routed(self, *args, **kwargs):
        if self.index_arg is None:
            raise _fail("%s: forward%s takes no routing indices" % (self.name, self.sig))
        bound = self.sig.bind(*args, **kwargs)
        top_k_index = bound.arguments[self.index_arg]
        E = self.num_experts
        with torch.no_grad():
            ids = [i for i in torch.unique(top_k_index).tolist() if 0 <= i < E]
            n = len(ids)
            # renumber: chosen experts 0..n-1 in increasing id, anything else
            # (an expert-parallel sentinel) to n, the module's own sentinel
            lut = torch.full((E + 1,), n, dtype=top_k_index.dtype, device=top_k_index.device)
            if n:
                lut[torch.tensor(ids, device=top_k_index.device)] = torch.arange(
                    n, dtype=top_k_index.dtype, device=top_k_index.device)
            bound.arguments[self.index_arg] = lut[top_k_index.clamp(0, E)]
        return self.run(ids, lambda: self.orig(*bound.args, **bound.kwargs))

    def forward_dense(self, hidden_states):
        # Every expert's rows, [E * T, H]; an expert the router did not choose
        # has all-zero rows (weight 0) and contributes exactly zero.
        E = self.num_experts
        x = hidden_states.view(E, -1, hidden_states.shape[-1])
        with torch.no_grad():
            ids = torch.nonzero(x.flatten(1).ne(0).any(1)).flatten().tolist()
        xc = x[ids].reshape(-1, x.shape[-1])
        yc = self.run(ids, lambda: self.orig(xc))
        y = hidden_states.new_zeros((E, x.shape[1], yc.shape[-1]))
        if ids:
            y[ids] = yc.view(len(ids), x.shape[1], -1)
        return y.view(-1, yc.shape[-1])


class _PerExpert(_Patched):
    """Experts as a ModuleList of modules with Linear-like children."""

    def __init__(self, handle, name, module, layer, device, block):
        super().__init__(handle, name, module, layer)
        self.device = device
        first = module[0]
        self.params = {}
        for pn, t in first.named_parameters():
            parent, _, leaf = pn.rpartition(".")
            base = PER_EXPERT.get(parent)
            if base is None:
                continue
            comp = base if leaf == "weight" else base + "." + leaf
            self.params[pn] = (comp, tuple(t.shape), t.dtype)
        if not self.params:
            raise _fail("%s: no expert parameters named %s" % (name, sorted(PER_EXPERT)))
        self.plan(handle.layout_of(layer))
        for i, ex in enumerate(module):
            for pn in self.params:
                sub, leaf = self._owner(ex, pn)
                sub._parameters[leaf] = _placeholder(torch.empty(
                    0, dtype=self.params[pn][2], device=device))
            orig = ex.forward
            ex.forward = self._expert_forward(i, ex, orig)
        self.hook = None
        router = getattr(block, "gate", None) or getattr(block, "router", None)
        if router is not None:
            self.top_k = _top_k(block, handle.model)
            self.hook = router.register_forward_hook(self._route_hook)

    @staticmethod
    def _owner(ex, pn):
        parent, _, leaf = pn.rpartition(".")
        return (ex.get_submodule(parent) if parent else ex), leaf

    def _route_hook(self, _mod, _inp, out):
        ids = _chosen(out, self.top_k)
        if ids:
            self.h.store.prefetch(self.layer, ids)
        if self.h.lookahead is not None:
            self.h.lookahead.after_demand(self.layer)

    def _expert_forward(self, i, ex, orig):
        def forward(*args, **kwargs):
            with self.h.store.expert(self.layer, i) as w:
                plan = self.plan(w.layout)
                saved = []
                try:
                    for pn, src in plan.items():
                        sub, leaf = self._owner(ex, pn)
                        saved.append((sub, leaf, sub._parameters[leaf]))
                        t = src.view(w) if not self.h.store.cuda else _device_view(src, w)
                        sub._parameters[leaf] = t.to(self.params[pn][2])
                    return orig(*args, **kwargs)
                finally:
                    for sub, leaf, t in saved:
                        sub._parameters[leaf] = t
        return forward


def _device_view(src, w):
    # w already holds device copies (ExpertStore.expert); only arrange them
    if src.kind == "same":
        return w[src.names[0]]
    if src.kind == "t":
        return w[src.names[0]].t()
    return torch.cat([w[src.names[0]], w[src.names[1]]], 0)


def _top_k(block, model):
    for obj in (block, getattr(block, "gate", None), getattr(block, "router", None),
                getattr(model, "config", None)):
        for a in ("top_k", "num_experts_per_tok", "experts_per_token"):
            v = getattr(obj, a, None) if obj is not None else None
            if isinstance(v, int) and v > 0:
                return v
    return 1


def _chosen(out, top_k):
    """Expert ids from a router's output: its integer tensor (indices) if it
    returns one, else the top_k of its logits."""
    ts = out if isinstance(out, (tuple, list)) else (out,)
    for t in ts:
        if torch.is_tensor(t) and not t.is_floating_point() and t.dtype != torch.bool:
            return torch.unique(t).tolist()
    for t in ts:
        if torch.is_tensor(t) and t.is_floating_point() and t.dim() >= 1:
            k = min(top_k, t.shape[-1])
            return torch.unique(torch.topk(t, k, dim=-1).indices).tolist()
    return []


class StreamedModel:
    """What stream_experts returns: the stream, the store and the patched
    modules (name, kind, layer). Kept on the model as model.smoe_stream."""

    def __init__(self, model, stream, device):
        self.model = model
        self.stream = stream
        self.store = ExpertStore(stream, device)
        self.patched = []
        self._layouts = {}
        self.lookahead = None

    def layout_of(self, layer):
        lay = self._layouts.get(layer)
        if lay is None:
            with self.stream.claim(layer, 0) as b:
                lay = b.layout
            self._layouts[layer] = lay
        return lay

    def stats(self):
        st = self.stream.stats()
        if self.lookahead is not None:
            st.update(self.lookahead.stats())
        return st

    def close(self):
        if self.lookahead is not None:
            self.lookahead.remove()
        self.store.close()
        self.stream.close()


def _model_device(model):
    for p in model.parameters():
        if p.device.type != "meta":
            return p.device
    return torch.device("cpu")


def stream_experts(model, vault, device=None, lookahead=False, **options):
    """Patch `model` in place so its MoE experts come from `vault` (a path,
    opened with **options as smoe_open_opts fields, or an open Stream).
    Returns a StreamedModel. device: where experts are computed (default:
    the device of the model's other parameters). lookahead: at each MoE
    layer, guess the next layer's experts by its router and norm applied to
    this layer's post-attention residual, and hint them (lookahead.py);
    stats() then reports lookahead_recall."""
    if isinstance(vault, Stream):
        stream = vault
    else:
        cfg = getattr(model, "config", None)
        cfg = getattr(cfg, "text_config", None) or cfg
        if "top_k" not in options and cfg is not None:
            k = getattr(cfg, "num_experts_per_tok", None)
            if isinstance(k, int) and k > 0:
                options["top_k"] = k
        stream = Stream(vault, **options)
    device = torch.device(device) if device is not None else _model_device(model)
    h = StreamedModel(model, stream, device)
    modules = dict(model.named_modules())
    for name, mod in list(modules.items()):
        if name.rsplit(".", 1)[-1] != "experts":
            continue
        m = _LAYER.search(name)
        if not m:
            continue
        layer = int(m.group(1))
        if layer >= stream.layers:
            raise _fail("%s: layer %d, but %s has %d layers" % (name, layer, stream.path,
                                                               stream.layers))
        if isinstance(mod, torch.nn.ModuleList):
            block = modules.get(name.rsplit(".", 1)[0])
            h.patched.append(_PerExpert(h, name, mod, layer, device, block))
        elif any(p in FUSED for p, _ in mod.named_parameters(recurse=False)):
            h.patched.append(_Fused(h, name, mod, layer, device))
    if not h.patched:
        stream.close()
        raise NotSupported(codes["SMOE_ENOTSUP"], "stream_experts: no MoE experts module "
                           "found in %s (looked for modules named 'experts' under "
                           "'layers.N.')" % type(model).__name__)
    if lookahead:
        from .lookahead import Lookahead
        layers = _decoder_layers(model)
        if layers is None:
            h.close()
            raise NotSupported(codes["SMOE_ENOTSUP"], "stream_experts: lookahead needs the "
                               "model's decoder layers (a ModuleList named 'layers')")
        h.lookahead = Lookahead(h, layers, _top_k(None, model))
    model.smoe_stream = h
    return h


def _decoder_layers(model):
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] == "layers" and isinstance(mod, torch.nn.ModuleList):
            return mod
    return None


def _checkpoint_files(path):
    import json
    import os
    idx = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(path, n) for n in names]
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise _fail("%s: no model.safetensors.index.json and no *.safetensors" % path)
    return [os.path.join(path, f) for f in files]


def from_pretrained(path, vault, device="cuda", dtype=None, model_class=None, **options):
    """Load a transformers checkpoint directory with its experts streamed
    from `vault`: the model is built without memory (accelerate's
    init_empty_weights), patched by stream_experts, and only the other
    tensors are read from the checkpoint, to `device`. For models whose
    experts do not fit in memory. Returns (model, StreamedModel).

    Tensors are matched by name; the checkpoint must use the model's own
    names for everything but the experts (true of the Qwen, OLMoE, gpt-oss,
    DeepSeek and GLM families; for a checkpoint that needs transformers'
    renaming, load the model normally and call stream_experts)."""
    from accelerate import init_empty_weights
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(path)
    cls = model_class or AutoModelForCausalLM
    with init_empty_weights():  # parameters on "meta", buffers real
        try:
            model = cls.from_config(cfg, dtype=dtype)
        except TypeError:
            model = cls.from_config(cfg, torch_dtype=dtype)
    device = torch.device(device)
    h = stream_experts(model, vault, device=device, **options)
    want = {n: p for n, p in model.named_parameters() if p.device.type == "meta"}
    for f in _checkpoint_files(path):
        with safe_open(f, framework="pt", device="cpu") as sf:
            for k in sf.keys():
                p = want.pop(k, None)
                if p is None:
                    continue
                parent, _, leaf = k.rpartition(".")
                mod = model.get_submodule(parent)
                t = sf.get_tensor(k).to(device=device, dtype=p.dtype)
                mod._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    if getattr(cfg, "tie_word_embeddings", False) or getattr(
            getattr(cfg, "text_config", None), "tie_word_embeddings", False):
        model.tie_weights()
        want = {n: p for n, p in model.named_parameters() if p.device.type == "meta"}
    if want:
        h.close()
        raise _fail("%s: the checkpoint has no tensor for %s%s" % (
            path, ", ".join(sorted(want)[:5]), " ..." if len(want) > 5 else ""))
    for mod in model.modules():
        for b, t in list(mod._buffers.items()):
            if t is not None:
                mod._buffers[b] = t.to(device)
    model.eval()
    return model, h
