"""Plain-PyTorch pieces over a Stream, for engines that are not transformers.

ExpertStore turns claimed experts into tensors: zero-copy views of the ring
on the CPU, or copies into device memory made with non_blocking copies from
the ring, registered once with cudaHostRegister. A blob is released when the
caller is done with its views (CPU) or when the copy out of it has completed
(CUDA: an event per blob, checked without blocking where possible).

StreamedMoE runs a MoE layer's routed experts from the store: the same
loop as transformers' eager experts (experts in increasing id, each
expert's rows in top-k position order, index_add_ into the output), so on
the CPU it matches a plain-torch layer bit for bit.

The library calls made per expert (prefetch, claim, release) take no lock
and allocate nothing; the Python around them allocates its small objects
(the Blob, the views) as Python does.
"""
import collections
import contextlib

import torch
import torch.nn.functional as F

from . import _arrays
from .errors import RingTooSmall, SmoeError
from .stream import Stream


def register_ring(stream):
    """Page-lock the stream's ring for the GPU (cudaHostRegister), once per
    stream; unregistered before the stream closes. Returns True when
    registered, False without CUDA."""
    if getattr(stream, "_cuda_registered", False):
        return True
    if not torch.cuda.is_available():
        return False
    r = stream.ring_region()
    cudart = torch.cuda.cudart()
    rc = cudart.cudaHostRegister(r["base"], r["length"], 0)
    if int(rc) != 0:
        raise RuntimeError("cudaHostRegister of the smoe ring (%d bytes at 0x%x) failed: %s"
                           % (r["length"], r["base"], rc))
    stream._cuda_registered = True

    def unregister():
        torch.cuda.synchronize()
        cudart.cudaHostUnregister(r["base"])
        stream._cuda_registered = False
    stream._before_close.append(unregister)
    return True


class Weights(dict):
    """{component name: tensor} of one expert, with its blob layout index."""
    layout = 0


class ExpertStore:
    """Claimed experts as tensors on `device`.

    stream: a Stream or a vault path (then opened with **options).
    """

    def __init__(self, stream, device="cpu", **options):
        if not isinstance(stream, Stream):
            stream = Stream(stream, **options)
        self.stream = stream
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        stream.ring_tensor()  # the ring's views: made once, dropped by the stream's close
        slots = stream.ring_region()["slots"]
        # Reads in flight ahead of the consumer, and blobs held until their
        # copies land: together well under the ring, so demand never finds
        # every slot taken by this store.
        self.window = max(1, slots // 2)
        self.max_pending = max(1, slots // 4)
        self._pending = collections.deque()
        self._views = {}
        if self.cuda:
            register_ring(stream)

    # -- views ------------------------------------------------------------

    @property
    def ring(self):
        """The ring as a uint8 tensor; not kept here, so that closing the
        stream frees the ring at once when no expert's tensor is left."""
        return self.stream.ring_tensor()

    def _layout_views(self, layout):
        v = self._views.get(layout)
        if v is None:
            v = []
            for c in self.stream.layout(layout):
                dt = _arrays.torch_dtype(c.dtype)
                size = torch.empty((), dtype=dt).element_size() if dt is not None else 1
                shape = _arrays._shape(c, size) if dt is not None else None
                v.append((c.name, c.offset, c.nbytes, dt if shape else None, shape))
            self._views[layout] = v
        return v

    def views(self, blob):
        """{component name: zero-copy CPU tensor} of a claimed blob; its
        .layout is the blob's layout index."""
        base, ring = blob.ring_offset, self.ring
        out = Weights()
        out.layout = blob.layout
        for name, off, nb, dt, shape in self._layout_views(blob.layout):
            t = ring[base + off:base + off + nb]
            out[name] = t.view(dt).view(shape) if dt is not None else t
        return out

    # -- prefetch, claim, release --------------------------------------------

    def prefetch(self, layer, experts, speculative=False):
        """Ask for experts; a full ring is not an error here (the claim asks
        again)."""
        for e in experts:
            try:
                self.stream.prefetch(layer, e, speculative)
            except RingTooSmall:
                break

    def _retire(self, blob):
        """Release now (CPU), or once the copies out of it have completed."""
        if not self.cuda:
            blob.release()
            return
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(self.device))
        self._pending.append((ev, blob))
        self.reap()

    def reap(self, block=False):
        """Release blobs whose copies have landed (all of them if block)."""
        p = self._pending
        while p and (block or len(p) > self.max_pending or p[0][0].query()):
            ev, blob = p.popleft()
            ev.synchronize()
            blob.release()

    def _claim(self, layer, expert):
        try:
            return self.stream.claim(layer, expert)
        except RingTooSmall:
            # Every slot is held or loading: free what our copies held.
            self.reap(block=True)
            return self.stream.claim(layer, expert)

    def stream_layer(self, layer, experts):
        """Yield (expert, {name: CPU tensor}) for each of `experts`, in
        order, having asked for all of them first (at most `window` reads
        ahead). The views are valid until the generator resumes; copy out of
        them (to the device) before that."""
        experts = list(experts)
        ahead = min(len(experts), self.window)
        self.prefetch(layer, experts[:ahead])
        for j, e in enumerate(experts):
            if j + ahead < len(experts):
                self.prefetch(layer, experts[j + ahead:j + ahead + 1])
            blob = self._claim(layer, e)
            try:
                yield e, self.views(blob)
            finally:
                self._retire(blob)

    @contextlib.contextmanager
    def expert(self, layer, expert):
        """{name: tensor on the store's device} of one expert, for the block."""
        for _, w in self.stream_layer(layer, [expert]):
            yield self.to_device(w)

    def to_device(self, views):
        if not self.cuda:
            return views
        out = Weights((k, v.to(self.device, non_blocking=True)) for k, v in views.items())
        out.layout = views.layout
        return out

    def close(self):
        self.reap(block=True)


def swiglu_expert(x, w, act=F.silu):
    """act(x gate^T) * (x up^T), then down: separate gate and up, or a fused
    gate_up (gate rows first) where the vault has one."""
    if "gate_up" in w:
        gate, up = F.linear(x, w["gate_up"]).chunk(2, dim=-1)
    else:
        gate, up = F.linear(x, w["gate"]), F.linear(x, w["up"])
    return F.linear(act(gate) * up, w["down"])


class StreamedMoE(torch.nn.Module):
    """The routed experts of one MoE layer, streamed.

    forward(hidden_states [T, H], top_k_index [T, k], top_k_weights [T, k])
    returns sum over k of weight * expert(x) as [T, H], in hidden_states'
    dtype. expert_fn(x, weights) computes one expert from its component
    tensors (default swiglu_expert).
    """

    def __init__(self, store, layer, expert_fn=swiglu_expert):
        super().__init__()
        self.store = store
        self.layer = layer
        self.expert_fn = expert_fn

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            ids = torch.unique(top_k_index).tolist()
        for e, views in self.store.stream_layer(self.layer, ids):
            pos, tok = torch.where((top_k_index == e).transpose(0, 1))
            w = self.store.to_device(views)
            y = self.expert_fn(hidden_states[tok], w) * top_k_weights[tok, pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out
