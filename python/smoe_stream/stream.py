"""Stream and Blob: the library's stream handle and a claimed expert."""
import collections
import ctypes

from . import _check, _lib
from ._handle import CLOSED, Handle
from .errors import InvalidArgument, NotSupported, raise_for, codes

# smoe_open_opts.flags
OPEN_ALLOW_BUFFERED = 1 << 0
OPEN_BUFFERED = 1 << 1
OPEN_MLOCK = 1 << 2
OPEN_FORCE_CLOSE = 1 << 3
OPEN_NO_PREWARM = 1 << 4
OPEN_NO_FREQ = 1 << 5
OPEN_SHAREABLE = 1 << 7  # the ring as a memory file: ring_region()["fd"] (since 1.1)
# smoe_open_opts.verify
VERIFY_DEFAULT, VERIFY_ON, VERIFY_OFF = 0, 1, 2
# smoe_open_opts.eviction
EVICT_DEFAULT, EVICT_LRU, EVICT_REUSE = 0, 1, 2
# smoe_prefetch() statuses
QUEUED, RESIDENT, INFLIGHT, SKIPPED = 0, 1, 2, 3
# smoe_claim() statuses
READY, HIT = 0, 1

_PREFETCH_SPECULATIVE = 1
# Returned by hot-path calls without a detailed message (no formatting on
# the hot path): the binding words those itself.
_SILENT = {codes.get("SMOE_EAGAIN"), codes.get("SMOE_ENOTRESIDENT"), codes.get("SMOE_EBUSY")}

Component = collections.namedtuple(
    "Component", "name dtype dtype_name shape offset nbytes quant_group quant_bits")


def _component(c):
    return Component(c.name.decode(), c.dtype, _lib.dtype_name(c.dtype).decode(),
                     tuple(int(c.shape[i]) for i in range(c.ndim)), int(c.offset),
                     int(c.nbytes), int(c.quant_group), int(c.quant_bits))


def _fields(st):
    return {f: getattr(st, f) for f, _ in st._fields_ if f != "struct_size"
            and not f.endswith("_") and type(st).since[f] <= _lib.VERSION}


def _hot_fail(rc, what):
    """Raise for a negative return of prefetch, claim, cancel or release."""
    if rc in _SILENT:
        from .errors import error_class, error_text
        raise error_class(rc)(rc, "%s: %s" % (what, error_text(rc)))
    raise_for(rc, what)


class Stream:
    """An open vault and its streamer (smoe_open ... smoe_close).

    Options are smoe_open_opts's fields by name (workers, ring_slots,
    slot_bytes, flags, verify, spec_share_pct, top_k, reserve_bytes,
    scout_bytes, scout_path, freq_path, trace_path, prewarm_pause_us,
    eviction, chunk_bytes, spec_chunk_bytes, log_fn; since 1.1 replicas, a
    list of paths of copies of the vault, and replica_retry_ms); an unknown
    name is an error. log_fn is a callable(level, message), called from library threads.
    Use it as a context manager: leaving the block closes the stream.
    """

    def __init__(self, path, **options):
        self._hd = None
        self.path = str(path)
        what = "Stream(%r)" % self.path
        c_path = _check.cstr(path, "path", what, path=True)
        opts = _lib.OpenOpts()
        _lib.open_opts_init(ctypes.byref(opts))
        opts.struct_size = _lib.OpenOpts.struct_size_for(_lib.VERSION)
        keep = []  # strings and the log callback, alive as long as the library's stream
        self._before_close = []  # e.g. unregistering the ring from a GPU
        for k, v in options.items():
            if k not in _lib.OpenOpts.since:
                raise InvalidArgument(codes["SMOE_EINVAL"], "Stream(%r): unknown option %r "
                                      "(smoe_open_opts has %s)" % (self.path, k,
                                      ", ".join(sorted(_lib.OpenOpts.since))))
            if _lib.OpenOpts.since[k] > _lib.VERSION:
                raise NotSupported(codes["SMOE_ENOTSUP"], "Stream(%r): option %r needs "
                                   "libsmoe_stream %d.%d, this one is %s" % (
                                       self.path, k, _lib.OpenOpts.since[k] // 10000,
                                       _lib.OpenOpts.since[k] // 100 % 100,
                                       _lib.version_string().decode()))
            if k == "log_user":
                raise InvalidArgument(codes["SMOE_EINVAL"], "Stream: log_user is not an option "
                                      "here; log_fn is a Python callable")
            if k == "n_replicas":
                raise InvalidArgument(codes["SMOE_EINVAL"], "Stream: n_replicas is not an "
                                      "option here; replicas is a list of paths")
            if k == "log_fn":
                v = self._log_callback(v)
            elif k == "replicas":
                paths = [_check.cstr(p, "replicas[%d]" % i, what, path=True)
                         for i, p in enumerate(v or [])]
                v = (_lib.cp * max(len(paths), 1))(*paths)
                opts.n_replicas = len(paths)
            elif k.endswith("_path"):
                v = None if v is None else _check.cstr(v, k, what, path=True)
            elif v is None:
                continue
            else:
                lo, hi, ctype = _check.ctype_range(dict(_lib.OpenOpts._fields_)[k])
                v = _check.integer(v, k, what, lo, hi, ctype)
            if v is not None:
                keep.append(v)
            setattr(opts, k, v)
        h = _lib.S()
        raise_for(_lib.open_(c_path, ctypes.byref(opts), ctypes.byref(h)))
        self._flags = opts.flags
        self._hd = Handle(h, self.path, bool(opts.flags & OPEN_FORCE_CLOSE), keep)
        self._ring_tensor = None
        info = self.vault_info()
        self.layers, self.experts = info["layers"], info["experts"]
        self._layouts = [self._read_layout(i) for i in range(info["layouts"])]

    @staticmethod
    def _log_callback(fn):
        if fn is None:
            return _lib.LOG_FN()

        def cb(_user, level, msg):
            try:
                fn(level, msg.decode(errors="replace"))
            except Exception:  # never unwind into C
                pass
        return _lib.LOG_FN(cb)

    # -- lifetime -------------------------------------------------------

    def _call(self, fn, *args):
        """fn(the handle, *args), counted as a call in flight (_handle.py)."""
        return self._hd.call(fn, *args)

    @property
    def closed(self):
        return self._hd is None or self._hd.state == CLOSED

    def shutdown(self):
        """Stop the streamer: waiting claims and later calls raise Shutdown."""
        raise_for(self._call(_lib.shutdown))

    def close(self):
        """Join the threads and free the stream. Raises Busy while blobs are
        claimed (unless opened with OPEN_FORCE_CLOSE: the blobs are then
        released, and every later use of one raises). Calls other threads
        are making in the library end first (they raise Shutdown). Arrays
        and tensors over the ring keep it mapped until they go
        (docs/python.md, "Lifetime"). Idempotent."""
        self._ring_tensor = None
        raise_for(self._hd.close(self._run_before_close), "close %s" % self.path)

    def _run_before_close(self):
        """Run the callbacks given for the close, each once (the handle calls
        this once nothing can call in any more)."""
        while self._before_close:
            self._before_close.pop()()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Collected (in a reference cycle too): so is every Blob of it, which
        # holds the Stream; release their claims and close.
        hd = getattr(self, "_hd", None)
        if hd is not None:
            self._ring_tensor = None
            try:
                hd.close(self._run_before_close, finalising=True)
            except Exception:
                pass

    def __repr__(self):
        state = "closed" if self.closed else "%d layers x %d experts" % (
            self.layers, self.experts)
        return "<smoe_stream.Stream %s: %s>" % (self.path, state)

    # -- the hot path ---------------------------------------------------

    def prefetch(self, layer, expert, speculative=False):
        """Ask for an expert; never blocks. Returns QUEUED, RESIDENT, INFLIGHT
        or SKIPPED (speculative only)."""
        layer, expert = _check.u32(layer, "layer", "prefetch"), _check.u32(expert, "expert",
                                                                           "prefetch")
        rc = self._call(_lib.prefetch, layer, expert, _PREFETCH_SPECULATIVE if speculative else 0)
        if rc < 0:
            _hot_fail(rc, "prefetch (layer %d, expert %d)" % (layer, expert))
        return rc

    def prefetch_hint(self, layer, expert, p):
        """A speculative prefetch that carries the engine's probability p
        (0 to 1) that the expert is asked for at its layer's next visit
        (smoe_prefetch_hint, since 1.1); never blocks. Returns QUEUED,
        RESIDENT, INFLIGHT or SKIPPED. A p outside [0, 1] or NaN raises
        InvalidArgument."""
        what = "prefetch_hint"
        layer, expert = _check.u32(layer, "layer", what), _check.u32(expert, "expert", what)
        p = _check.probability(p, "p", lambda: "%s (layer %d, expert %d)" % (what, layer, expert))
        rc = self._call(_lib.prefetch_hint, layer, expert, p)
        if rc < 0:
            _hot_fail(rc, "prefetch_hint (layer %d, expert %d)" % (layer, expert))
        return rc

    def cancel(self, layer, expert):
        """Cancel a queued speculative read no worker has started. True if
        cancelled; False if its read has started or none is queued."""
        layer, expert = _check.u32(layer, "layer", "cancel"), _check.u32(expert, "expert",
                                                                         "cancel")
        rc = self._call(_lib.cancel, layer, expert)
        if rc in (codes["SMOE_EBUSY"], codes["SMOE_ENOTRESIDENT"]):
            return False
        if rc < 0:
            _hot_fail(rc, "cancel (layer %d, expert %d)" % (layer, expert))
        return True

    def claim(self, layer, expert, timeout=None):
        """Take an expert; returns a Blob (a context manager that releases it).

        timeout None waits as long as it takes, a number of seconds waits up
        to that long (Timeout), 0 does not wait (WouldBlock if it is not
        READY). Infinity, or more than 584 years (UINT64_MAX ns), waits as
        long as it takes; NaN or a negative timeout raises InvalidArgument.
        A failed read raises ReadError.
        """
        layer, expert = _check.u32(layer, "layer", "claim"), _check.u32(expert, "expert",
                                                                        "claim")
        ns = _check.timeout_ns(timeout, "claim")
        if timeout == 0:
            rc, c = self._hd.claim(_lib.claim, layer, expert)
        else:
            rc, c = self._hd.claim(_lib.claim_wait, layer, expert, ns)
        if rc < 0:
            _hot_fail(rc, "claim (layer %d, expert %d)" % (layer, expert))
        return Blob(self, c, rc)

    def release(self, blob):
        blob.release()

    def set_busy(self, busy=True):
        """Engine busy flag: no pre-warm reads start while busy."""
        raise_for(self._call(_lib.set_busy, 1 if busy else 0))

    def warmup(self):
        """Fill the ring's empty slots with the likeliest experts at the
        drive's speed (smoe_warmup, default options); returns at once, with
        the number of experts chosen."""
        rc = self._call(_lib.warmup, None)
        raise_for(rc, "warmup %s" % self.path)
        return rc

    def warmup_wait(self, timeout=None):
        """Wait for the running warm-up to end (Timeout after `timeout` s;
        timeouts as claim's)."""
        raise_for(self._call(_lib.warmup_wait, _check.timeout_ns(timeout, "warmup_wait")))

    def warmup_cancel(self):
        """Stop the running warm-up; returns once no worker reads for it."""
        raise_for(self._call(_lib.warmup_cancel))

    def freq_save(self):
        """Save the popularity histogram now."""
        raise_for(self._call(_lib.freq_save), "freq_save %s" % self.path)

    # -- queries ----------------------------------------------------------

    def stats(self):
        """Counters since open (smoe_stats), as a dict of the fields this
        library version fills."""
        st = _lib.Stats()
        st.struct_size = _lib.Stats.struct_size_for(_lib.VERSION)
        raise_for(self._call(_lib.get_stats, ctypes.byref(st)))
        return _fields(st)

    def ring_region(self):
        """The ring's memory, for registering it once with a GPU API:
        dict(base (an address), length, slot_stride, slots; since 1.1 also
        fd, fd_offset: the ring's memory file with OPEN_SHAREABLE, else -1).
        The address is valid until the stream is closed; Python views of
        the ring come from ring_tensor() and Blob, which keep it mapped."""
        r = _lib.RingRegion()
        r.struct_size = _lib.RingRegion.struct_size_for(_lib.VERSION)
        raise_for(self._call(_lib.ring_region_get, ctypes.byref(r)))
        return _fields(r)

    def vault_info(self):
        """dict(layers, experts, layouts, top_k, max_padded, total_padded,
        file_size, vault_id)."""
        vi = _lib.VaultInfo()
        vi.struct_size = _lib.VaultInfo.struct_size_for(_lib.VERSION)
        raise_for(self._call(_lib.vault_info_get, ctypes.byref(vi)))
        return _fields(vi)

    def _read_layout(self, layout):
        n = raise_for(self._call(_lib.layout_count, layout), "layout %d" % layout)
        out = []
        for i in range(n):
            c = _lib.Component()
            raise_for(self._call(_lib.layout_component, layout, i, ctypes.byref(c)))
            out.append(_component(c))
        return out

    def layout(self, layout=0):
        """The components of blob layout `layout`, in blob order."""
        layout = _check.u32(layout, "layout", "layout")
        if not 0 <= layout < len(self._layouts) or self.closed:
            raise_for(self._call(_lib.layout_count, layout), "layout %d" % layout)
        return list(self._layouts[layout])

    def layouts(self):
        return [list(lay) for lay in self._layouts]

    def component(self, layout, name):
        """Component `name` of a layout (NotFound if it has none)."""
        layout = _check.u32(layout, "layout", "component")
        c_name = _check.cstr(name, "name", "component")
        for c in self._layouts[layout] if layout < len(self._layouts) else ():
            if c.name == name:
                return c
        c = _lib.Component()
        raise_for(self._call(_lib.layout_find, layout, c_name, ctypes.byref(c)),
                  "layout %d" % layout)
        return _component(c)

    META_KEYS = ("arch", "model", "top_k", "quant", "source_format", "scout")

    def meta(self, key=None):
        """Value of a vault metadata key, or None. Without a key: a dict of
        the keys `smoe pack` writes that this vault has."""
        if key is None:
            return {k: v for k, v in ((k, self.meta(k)) for k in self.META_KEYS)
                    if v is not None}
        v = self._call(_lib.meta_get, _check.cstr(key, "key", "meta"))
        return None if v is None else v.decode()

    def ring_tensor(self):
        """The whole ring as one zero-copy torch uint8 tensor (CPU), for
        engines that address blobs by ring_offset. It, and every tensor
        made from it, keeps the ring mapped (docs/python.md, "Lifetime")."""
        t = self._ring_tensor
        if t is None:
            import torch
            t = torch.frombuffer(self._hd.ring(), dtype=torch.uint8)
            self._ring_tensor = t
        return t

class Blob:
    """A claimed expert. Its memory is valid until release(); leaving a
    `with` block releases it. Arrays and tensors from numpy() and torch() are
    views of the ring: copy what must outlive the release."""

    __slots__ = ("_stream", "_c", "status", "_mv", "__weakref__")

    def __init__(self, stream, claim, status):
        self._stream = stream
        self._c = claim  # _handle.Claim: the descriptor, the views given out
        self.status = status
        self._mv = None

    layer = property(lambda self: self._c.desc.layer)
    expert = property(lambda self: self._c.desc.expert)
    layout = property(lambda self: self._c.desc.layout)
    size = property(lambda self: self._c.desc.size)
    ring_offset = property(lambda self: self._c.desc.ring_offset)

    @property
    def released(self):
        return self._c.ended is not None

    def _ended_error(self, what=None):
        d = self._c.desc
        if self._c.ended == "closed":
            msg = "stream %s was closed while blob (layer %d, expert %d) was claimed" % (
                self._stream.path, d.layer, d.expert)
        else:
            msg = "blob (layer %d, expert %d) was released; claim it again" % (d.layer,
                                                                              d.expert)
        return InvalidArgument(codes["SMOE_EINVAL"], "%s: %s" % (what, msg) if what else msg)

    def _live(self):
        if self._c.ended:
            raise self._ended_error()
        return self._c.desc

    @property
    def address(self):
        """Address of the payload (16 KiB-aligned)."""
        return self._live().data

    def _memory(self):
        d = self._live()
        if self._mv is None:
            mv = memoryview(self._stream._hd.ring()).cast("B")
            self._mv = mv[d.ring_offset:d.ring_offset + d.size]
            self._c.views.append(self._mv)
        return self._mv

    @property
    def buffer(self):
        """A read-only memoryview of the payload; released with the blob, so
        a later access raises ValueError."""
        v = self._memory().toreadonly()
        self._c.views.append(v)
        if self._c.ended:  # a close on another thread ended it meanwhile
            self._c.drop_views()
            raise self._ended_error()
        return v

    @property
    def components(self):
        return self._stream.layout(self._live().layout)

    def component(self, name):
        return self._stream.component(self._live().layout, name)

    def numpy(self, name=None):
        """Zero-copy numpy array of component `name` (the whole payload as
        uint8 when name is None), dtype and shape from the layout."""
        from . import _arrays
        self._live()
        if name is None:
            return _arrays.numpy_view(self.buffer, None)
        return _arrays.numpy_view(self.buffer, self.component(name))

    def torch(self, name=None):
        """Zero-copy torch tensor (CPU) of component `name`, like numpy()."""
        from . import _arrays
        d = self._live()
        ring = self._stream.ring_tensor()
        if name is None:
            return ring[d.ring_offset:d.ring_offset + d.size]
        return _arrays.torch_view(ring, d.ring_offset, self.component(name))

    def release(self):
        """Give the expert back (idempotent). The memoryviews from .buffer
        are released with it. After a close of the stream (OPEN_FORCE_CLOSE)
        released it, raises InvalidArgument."""
        if self._c.ended == "closed":
            raise self._ended_error("release")
        rc = self._stream._hd.release(self._c)
        if rc < 0:
            d = self._c.desc
            _hot_fail(rc, "release (layer %d, expert %d)" % (d.layer, d.expert))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        # Through the handle, which does nothing once the claim has ended
        # (released, or by a close): never a call on a freed stream.
        try:
            self._stream._hd.release(self._c)
        except Exception:
            pass

    def __repr__(self):
        d = self._c.desc
        return "<smoe_stream.Blob layer %d expert %d, %d bytes%s>" % (
            d.layer, d.expert, d.size, ", released" if self._c.ended else "")
