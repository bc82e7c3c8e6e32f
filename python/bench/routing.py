"""A routing override for measurements (hf_offload.py --routing): the
experts each MoE router picks are replaced, the same way in every process
that runs the model, so a benchmark does not rest on a random-weight
model's routing (which repeats far more than a trained model's).

- Uniform(layers, experts, k, seed): each (token, layer) gets k distinct
  experts drawn uniformly at random from a generator seeded by (seed,
  layer, token): the worst case for any cache.
- TraceRouting(read_trace(path), layers, experts, k): a routing trace in
  the project's format (docs/trace-format.md) replayed onto the model's
  shape (TraceRouting says how).
- Override(model, routing): a forward hook on each MoE block's router
  (`gate` or `router`, beside an `experts` module under `layers.N.`) that
  replaces the integer index tensor the router returns; the router's
  weights are kept, so the experts compute on tensors of unchanged shape.
  Token numbers count the rows each layer's router has seen.

Only Override needs torch: Uniform, TraceRouting and read_trace are plain
Python.
"""
import gzip
import hashlib
import random
import re


class RoutingError(ValueError):
    pass


def _check_shape(layers, experts, k):
    if layers < 1 or experts < 1 or not 1 <= k <= experts:
        raise RoutingError("model shape %d layers x %d experts, top-%d: need at least one "
                           "layer and 1 <= top-k <= experts" % (layers, experts, k))


class Uniform:
    mode = "uniform"

    def __init__(self, layers, experts, k, seed=0):
        _check_shape(layers, experts, k)
        self.layers, self.num_experts, self.k, self.seed = layers, experts, k, seed

    def experts(self, token, layer):
        # one generator per (seed, layer, token): any row is reproducible
        # alone, whatever order the processes ask in
        rng = random.Random("uniform:%d:%d:%d" % (self.seed, layer, token))
        return rng.sample(range(self.num_experts), self.k)

    def describe(self):
        return ("uniform: each token's top-%d of %d experts per layer drawn uniformly at "
                "random, seed %d" % (self.k, self.num_experts, self.seed))


class Trace:
    """A parsed trace: shape, and rows[i] = {layer: ranked experts} for the
    i-th distinct token in file order."""

    def __init__(self, path, layers, experts, topk, model, rows, truncated):
        self.path, self.layers, self.experts, self.topk = path, layers, experts, topk
        self.model, self.rows, self.truncated = model, rows, truncated


_KEYS = {"layers": "layers", "experts": "experts", "topk": "topk", "top_k": "topk",
         "model": "model"}


def _open_text(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt") if gz else open(path, "r")


def _header(path, lineno, text, hdr):
    # key=value words anywhere in a comment, a `# source:` line included
    for word in text[1:].split():
        key, eq, val = word.partition("=")
        name = _KEYS.get(key)
        if not eq or name is None:
            continue
        if name == "model":
            hdr.setdefault("model", val)
            continue
        top = 64 if name == "topk" else 65536
        if not val.isdigit() or not 1 <= int(val) <= top:
            raise RoutingError("%s:%d: %s=%s: expected a number from 1 to %d"
                               % (path, lineno, key, val, top))
        if hdr.get(name, int(val)) != int(val):
            raise RoutingError("%s:%d: %s=%s, but an earlier line gave %d"
                               % (path, lineno, key, val, hdr[name]))
        hdr[name] = int(val)


def _record(path, lineno, text, hdr):
    ranked = text.split("|", 1)[0].split()
    spec = text.split("|", 1)[1].split() if "|" in text else []
    nums = []
    for w in ranked + spec:
        if not w.isdigit() or int(w) > 4294967295:
            raise RoutingError("%s:%d: %r: expected 'token layer e1 ... ek' of decimal "
                               "numbers up to 4294967295" % (path, lineno, w))
        nums.append(int(w))
    if len(ranked) < 3:
        raise RoutingError("%s:%d: expected 'token layer e1 ... ek' (at least one expert)"
                           % (path, lineno))
    token, layer, experts = nums[0], nums[1], nums[2:len(ranked)]
    if len(experts) > 64 or len(spec) > 64:
        raise RoutingError("%s:%d: %d ranked and %d speculative experts: at most 64 each"
                           % (path, lineno, len(experts), len(spec)))
    if len(set(nums[2:])) != len(nums) - 2:
        raise RoutingError("%s:%d: an expert repeats within the line: expected distinct "
                           "experts" % (path, lineno))
    if "layers" in hdr and layer >= hdr["layers"]:
        raise RoutingError("%s:%d: layer %d: the header gives layers=%d"
                           % (path, lineno, layer, hdr["layers"]))
    big = max(nums[2:])
    if "experts" in hdr and big >= hdr["experts"]:
        raise RoutingError("%s:%d: expert %d: the header gives experts=%d"
                           % (path, lineno, big, hdr["experts"]))
    if "topk" in hdr and len(experts) > hdr["topk"]:
        raise RoutingError("%s:%d: %d ranked experts: the header gives topk=%d"
                           % (path, lineno, len(experts), hdr["topk"]))
    return token, layer, experts


def read_trace(path, max_tokens=None):
    """Parse a trace (plain or gzip), checking the rules of
    docs/trace-format.md; stop after max_tokens distinct tokens. A bad line
    raises RoutingError naming the file, the line and what was expected; a
    file that cannot be read or decoded raises RoutingError too."""
    try:
        return _read_trace(path, max_tokens)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise RoutingError("%s: cannot read the trace: %s" % (path, e)) from None


def _read_trace(path, max_tokens):
    hdr, rows = {}, []
    last_tok = last_layer = None
    big_layer = big_expert = topk = 0
    truncated = False
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.rstrip("\r\n")
            if len(text) > 4095:
                raise RoutingError("%s:%d: line of %d bytes: at most 4095"
                                   % (path, lineno, len(text)))
            if not text.strip():
                continue
            if text.startswith("#"):
                _header(path, lineno, text, hdr)
                continue
            token, layer, experts = _record(path, lineno, text, hdr)
            if last_tok is not None and token < last_tok:
                raise RoutingError("%s:%d: token %d after token %d: token numbers never "
                                   "decrease" % (path, lineno, token, last_tok))
            if token == last_tok and layer <= last_layer:
                raise RoutingError("%s:%d: layer %d after layer %d within token %d: layers "
                                   "strictly increase" % (path, lineno, layer, last_layer,
                                                          token))
            if token != last_tok:
                if max_tokens is not None and len(rows) == max_tokens:
                    truncated = True
                    break
                rows.append({})
            rows[-1][layer] = experts
            last_tok, last_layer = token, layer
            big_layer, big_expert = max(big_layer, layer), max(big_expert, max(experts))
            topk = max(topk, len(experts))
    if not rows:
        raise RoutingError("%s: no records: expected lines 'token layer e1 ... ek'" % path)
    return Trace(path, hdr.get("layers", big_layer + 1), hdr.get("experts", big_expert + 1),
                 hdr.get("topk", topk), hdr.get("model", "?"), rows, truncated)


class TraceRouting:
    """A trace replayed onto a model of `layers` x `experts`, top-k:
    - model token t replays the trace's t-th token (modulo the tokens read);
    - model layer L replays trace layer L mod the trace's layers;
    - the model's rank j takes the trace's rank j mod m (m: the experts on
      the trace's line), moved by (j div m) x the trace's experts, modulo
      the model's experts: a model with more experts and a larger top-k
      sees each trace expert in several blocks, so the trace's reuse
      pattern is kept; an expert already taken on the row moves to the
      next free one (only where the trace has more experts than the model,
      or the blocks wrap);
    - a token the trace has no line for at a layer (a recorder dropped it)
      repeats the nearest earlier token's line for that layer, else the
      nearest later one's."""
    mode = "trace"

    def __init__(self, trace, layers, experts, k):
        _check_shape(layers, experts, k)
        self.trace, self.layers, self.num_experts, self.k = trace, layers, experts, k
        self.filled = {}
        self.notes = []
        for tl in sorted({L % trace.layers for L in range(layers)}):
            col = [r.get(tl) for r in trace.rows]
            if all(c is None for c in col):
                raise RoutingError("%s: no line for layer %d in the %d tokens read"
                                   % (trace.path, tl, len(trace.rows)))
            first = next(c for c in col if c is not None)
            prev, out, gaps = first, [], 0
            for c in col:
                gaps += c is None
                prev = c if c is not None else prev
                out.append(prev)
            self.filled[tl] = out
            if gaps:
                self.notes.append("trace layer %d: %d of %d tokens without a line repeat "
                                  "the nearest one" % (tl, gaps, len(col)))

    def experts(self, token, layer):
        row = self.filled[layer % self.trace.layers][token % len(self.trace.rows)]
        m, te, me = len(row), self.trace.experts, self.num_experts
        out, used = [], set()
        for j in range(self.k):
            e = (row[j % m] + (j // m) * te) % me
            while e in used:
                e = (e + 1) % me
            used.add(e)
            out.append(e)
        return out

    def reachable(self):
        """Experts per layer a replay can touch, at most: the blocks the
        shortest trace line needs for k ranks, times the trace's experts."""
        m = min(len(r) for col in self.filled.values() for r in col)
        return min(self.num_experts, -(-self.k // m) * self.trace.experts)

    def describe(self):
        t, n = self.trace, len(self.trace.rows)
        lines = ["trace %s (model %s): %d layers x %d experts, top-%d; %d tokens read%s"
                 % (t.path, t.model, t.layers, t.experts, t.topk, n,
                    " (stopped there)" if t.truncated else "")]
        if self.layers > t.layers:
            lines.append("the model's %d layers are more than the trace's %d: model layer L "
                         "replays trace layer L mod %d" % (self.layers, t.layers, t.layers))
        elif self.layers < t.layers:
            lines.append("the model's %d layers replay the trace's first %d of %d"
                         % (self.layers, self.layers, t.layers))
        if self.k != t.topk or self.num_experts != t.experts:
            lines.append("the model's top-%d of %d experts: rank j takes the trace's rank "
                         "j mod %d plus %d x (j div %d), modulo %d; at most %d of %d experts "
                         "per layer reachable" % (self.k, self.num_experts, t.topk, t.experts,
                                                  t.topk, self.num_experts, self.reachable(),
                                                  self.num_experts))
        lines.append("model token t replays trace token t mod %d" % n)
        return "; ".join(lines + self.notes)


def parse_mode(text, layers, experts, k, seed=0, max_tokens=None):
    """--routing's value (model | uniform | trace:FILE) to a routing, or
    None for the model's own."""
    if text == "model":
        return None
    if text == "uniform":
        return Uniform(layers, experts, k, seed)
    if text.startswith("trace:") and len(text) > 6:
        return TraceRouting(read_trace(text[6:], max_tokens), layers, experts, k)
    raise RoutingError("--routing %r: expected model, uniform or trace:FILE" % text)


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class Override:
    """Forward hooks on the model's routers that replace the chosen
    indices with routing.experts(token, layer). digest() is a hash of every
    replacement made so far, to check that two runs routed alike."""

    def __init__(self, model, routing):
        import torch
        self.torch, self.routing = torch, routing
        self.seen, self.handles = {}, []
        self.sha = hashlib.sha1()
        mods = dict(model.named_modules())
        for name, mod in mods.items():
            parent, _, leaf = name.rpartition(".")
            m = _LAYER.search(name)
            if leaf not in ("gate", "router") or not m or "experts" not in dict(
                    mods[parent].named_children()):
                continue
            layer = int(m.group(1))
            if layer >= routing.layers:
                raise RoutingError("%s: layer %d, but the routing covers %d layers"
                                   % (name, layer, routing.layers))
            self.seen[layer] = 0
            self.handles.append(mod.register_forward_hook(self._hook(layer)))
        if not self.handles:
            raise RoutingError("%s: no MoE router found (a module named gate or router "
                               "beside one named experts, under layers.N.)"
                               % type(model).__name__)

    def _hook(self, layer):
        def hook(_mod, _inp, out):
            return self.replace(layer, out)
        return hook

    def replace(self, layer, out):
        torch = self.torch
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        pos = [i for i, t in enumerate(outs) if torch.is_tensor(t) and t.dim() == 2 and
               not t.is_floating_point() and t.dtype != torch.bool]
        if len(pos) != 1:
            raise RoutingError("the router of layer %d returned %d integer [tokens, k] "
                               "tensors; the override needs one, its top-k indices (as "
                               "transformers 5's routers return)" % (layer, len(pos)))
        idx = outs[pos[0]]
        n, k = idx.shape
        if k != self.routing.k:
            raise RoutingError("the router of layer %d chose %d experts per token; the "
                               "routing gives %d" % (layer, k, self.routing.k))
        t0 = self.seen[layer]
        self.seen[layer] = t0 + n
        rows = [self.routing.experts(t0 + t, layer) for t in range(n)]
        self.sha.update(repr((layer, t0, rows)).encode())
        outs[pos[0]] = torch.tensor(rows, dtype=idx.dtype, device=idx.device)
        if not isinstance(out, (tuple, list)):
            return outs[0]
        return type(out)(outs) if isinstance(out, list) else tuple(outs)

    def digest(self):
        return self.sha.hexdigest()[:16]

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
