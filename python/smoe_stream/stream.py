"""Stream and Blob: the library's stream handle and a claimed expert."""
import collections
import ctypes
import threading

from . import _lib
from .errors import InvalidArgument, NotSupported, SmoeError, raise_for, codes

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
_FOREVER = (1 << 64) - 1
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
        self._h = None
        self.path = str(path)
        opts = _lib.OpenOpts()
        _lib.open_opts_init(ctypes.byref(opts))
        opts.struct_size = _lib.OpenOpts.struct_size_for(_lib.VERSION)
        self._keep = []  # strings and the log callback, alive as long as the stream
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
                paths = [str(p).encode() for p in (v or [])]
                v = (_lib.cp * max(len(paths), 1))(*paths)
                opts.n_replicas = len(paths)
            elif k.endswith("_path"):
                v = None if v is None else str(v).encode()
            elif v is None:
                continue
            if v is not None:
                self._keep.append(v)
            setattr(opts, k, v)
        h = _lib.S()
        raise_for(_lib.open_(self.path.encode(), ctypes.byref(opts), ctypes.byref(h)))
        self._h = h
        self._flags = opts.flags
        self._lock = threading.Lock()
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

    def _handle(self):
        h = self._h
        if h is None:
            raise InvalidArgument(codes["SMOE_EINVAL"], "stream %s is closed" % self.path)
        return h

    @property
    def closed(self):
        return self._h is None

    def shutdown(self):
        """Stop the streamer: waiting claims and later calls raise Shutdown."""
        raise_for(_lib.shutdown(self._handle()))

    def close(self):
        """Join the threads and free the stream. Raises Busy while blobs are
        claimed (unless opened with OPEN_FORCE_CLOSE). Idempotent."""
        if self._h is None:
            return
        while self._before_close:
            self._before_close.pop()()
        raise_for(_lib.close(self._h), "close %s" % self.path)
        self._h = None
        self._ring_tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            try:
                _lib.close(self._h)
            except Exception:
                pass

    def __repr__(self):
        state = "closed" if self._h is None else "%d layers x %d experts" % (
            self.layers, self.experts)
        return "<smoe_stream.Stream %s: %s>" % (self.path, state)

    # -- the hot path ---------------------------------------------------

    def prefetch(self, layer, expert, speculative=False):
        """Ask for an expert; never blocks. Returns QUEUED, RESIDENT, INFLIGHT
        or SKIPPED (speculative only)."""
        rc = _lib.prefetch(self._handle(), layer, expert,
                           _PREFETCH_SPECULATIVE if speculative else 0)
        if rc < 0:
            _hot_fail(rc, "prefetch (layer %d, expert %d)" % (layer, expert))
        return rc

    def prefetch_hint(self, layer, expert, p):
        """A speculative prefetch that carries the engine's probability p
        (0 to 1) that the expert is asked for at its layer's next visit
        (smoe_prefetch_hint, since 1.1); never blocks. Returns QUEUED,
        RESIDENT, INFLIGHT or SKIPPED. A p outside [0, 1] or NaN raises
        InvalidArgument."""
        rc = _lib.prefetch_hint(self._handle(), layer, expert, p)
        if rc < 0:
            _hot_fail(rc, "prefetch_hint (layer %d, expert %d)" % (layer, expert))
        return rc

    def cancel(self, layer, expert):
        """Cancel a queued speculative read no worker has started. True if
        cancelled; False if its read has started or none is queued."""
        rc = _lib.cancel(self._handle(), layer, expert)
        if rc in (codes["SMOE_EBUSY"], codes["SMOE_ENOTRESIDENT"]):
            return False
        if rc < 0:
            _hot_fail(rc, "cancel (layer %d, expert %d)" % (layer, expert))
        return True

    def claim(self, layer, expert, timeout=None):
        """Take an expert; returns a Blob (a context manager that releases it).

        timeout None waits as long as it takes, a number of seconds waits up
        to that long (Timeout), 0 does not wait (WouldBlock if it is not
        READY). A failed read raises ReadError.
        """
        h = self._handle()
        d = _lib.BlobDesc()
        if timeout == 0:
            rc = _lib.claim(h, layer, expert, ctypes.byref(d))
        else:
            ns = _FOREVER if timeout is None else max(0, int(timeout * 1e9))
            rc = _lib.claim_wait(h, layer, expert, ns, ctypes.byref(d))
        if rc < 0:
            _hot_fail(rc, "claim (layer %d, expert %d)" % (layer, expert))
        return Blob(self, d, rc)

    def release(self, blob):
        blob.release()

    def set_busy(self, busy=True):
        """Engine busy flag: no pre-warm reads start while busy."""
        raise_for(_lib.set_busy(self._handle(), 1 if busy else 0))

    def warmup(self):
        """Fill the ring's empty slots with the likeliest experts at the
        drive's speed (smoe_warmup, default options); returns at once, with
        the number of experts chosen."""
        rc = _lib.warmup(self._handle(), None)
        raise_for(rc, "warmup %s" % self.path)
        return rc

    def warmup_wait(self, timeout=None):
        """Wait for the running warm-up to end (Timeout after `timeout` s)."""
        ns = _FOREVER if timeout is None else max(0, int(timeout * 1e9))
        raise_for(_lib.warmup_wait(self._handle(), ns))

    def warmup_cancel(self):
        """Stop the running warm-up; returns once no worker reads for it."""
        raise_for(_lib.warmup_cancel(self._handle()))

    def freq_save(self):
        """Save the popularity histogram now."""
        raise_for(_lib.freq_save(self._handle()), "freq_save %s" % self.path)

    # -- queries ----------------------------------------------------------

    def stats(self):
        """Counters since open (smoe_stats), as a dict of the fields this
        library version fills."""
        st = _lib.Stats()
        st.struct_size = _lib.Stats.struct_size_for(_lib.VERSION)
        raise_for(_lib.get_stats(self._handle(), ctypes.byref(st)))
        return _fields(st)

    def ring_region(self):
        """The ring's memory, for registering it once with a GPU API:
        dict(base (an address), length, slot_stride, slots; since 1.1 also
        fd, fd_offset: the ring's memory file with OPEN_SHAREABLE, else -1)."""
        r = _lib.RingRegion()
        r.struct_size = _lib.RingRegion.struct_size_for(_lib.VERSION)
        raise_for(_lib.ring_region_get(self._handle(), ctypes.byref(r)))
        return _fields(r)

    def vault_info(self):
        """dict(layers, experts, layouts, top_k, max_padded, total_padded,
        file_size, vault_id)."""
        vi = _lib.VaultInfo()
        vi.struct_size = _lib.VaultInfo.struct_size_for(_lib.VERSION)
        raise_for(_lib.vault_info_get(self._handle(), ctypes.byref(vi)))
        return _fields(vi)

    def _read_layout(self, layout):
        h = self._handle()
        n = raise_for(_lib.layout_count(h, layout), "layout %d" % layout)
        out = []
        for i in range(n):
            c = _lib.Component()
            raise_for(_lib.layout_component(h, layout, i, ctypes.byref(c)))
            out.append(_component(c))
        return out

    def layout(self, layout=0):
        """The components of blob layout `layout`, in blob order."""
        self._handle()
        if not 0 <= layout < len(self._layouts):
            raise_for(_lib.layout_count(self._h, layout), "layout %d" % layout)
        return list(self._layouts[layout])

    def layouts(self):
        return [list(lay) for lay in self._layouts]

    def component(self, layout, name):
        """Component `name` of a layout (NotFound if it has none)."""
        for c in self._layouts[layout] if 0 <= layout < len(self._layouts) else ():
            if c.name == name:
                return c
        c = _lib.Component()
        raise_for(_lib.layout_find(self._handle(), layout, name.encode(), ctypes.byref(c)),
                  "layout %d" % layout)
        return _component(c)

    META_KEYS = ("arch", "model", "top_k", "quant", "source_format", "scout")

    def meta(self, key=None):
        """Value of a vault metadata key, or None. Without a key: a dict of
        the keys `smoe pack` writes that this vault has."""
        if key is None:
            return {k: v for k, v in ((k, self.meta(k)) for k in self.META_KEYS)
                    if v is not None}
        v = _lib.meta_get(self._handle(), key.encode())
        return None if v is None else v.decode()

    def ring_tensor(self):
        """The whole ring as one zero-copy torch uint8 tensor (CPU), for
        engines that address blobs by ring_offset."""
        if self._ring_tensor is None:
            import torch
            r = self.ring_region()
            buf = (ctypes.c_uint8 * r["length"]).from_address(r["base"])
            self._ring_tensor = torch.frombuffer(buf, dtype=torch.uint8)
        return self._ring_tensor


class Blob:
    """A claimed expert. Its memory is valid until release(); leaving a
    `with` block releases it. Arrays and tensors from numpy() and torch() are
    views of the ring: copy what must outlive the release."""

    __slots__ = ("_stream", "_d", "status", "_mv", "_views", "__weakref__")

    def __init__(self, stream, desc, status):
        self._stream = stream
        self._d = desc
        self.status = status
        self._mv = None
        self._views = []

    layer = property(lambda self: self._d.layer)
    expert = property(lambda self: self._d.expert)
    layout = property(lambda self: self._d.layout)
    size = property(lambda self: self._d.size)
    ring_offset = property(lambda self: self._d.ring_offset)

    @property
    def released(self):
        return not self._d.held

    def _live(self):
        if not self._d.held:
            raise InvalidArgument(codes["SMOE_EINVAL"], "blob (layer %d, expert %d) was "
                                  "released; claim it again" % (self._d.layer,
                                                                self._d.expert))
        return self._d

    @property
    def address(self):
        """Address of the payload (16 KiB-aligned)."""
        return self._live().data

    def _memory(self):
        d = self._live()
        if self._mv is None:
            self._mv = memoryview((ctypes.c_uint8 * d.size).from_address(d.data)).cast("B")
        return self._mv

    @property
    def buffer(self):
        """A read-only memoryview of the payload; released with the blob, so
        a later access raises ValueError."""
        v = self._memory().toreadonly()
        self._views.append(v)
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
        are released with it."""
        if not self._d.held:
            return
        for v in self._views:
            try:
                v.release()
            except BufferError:
                pass  # an array made from it is alive: it outlives the blob
        self._views = []
        if self._mv is not None:
            try:
                self._mv.release()
            except BufferError:
                pass  # numpy arrays over it are alive; they outlive the blob
            self._mv = None
        h = self._stream._h
        if h is None:
            raise InvalidArgument(codes["SMOE_EINVAL"], "release: stream %s is closed"
                                  % self._stream.path)
        rc = _lib.release(h, ctypes.byref(self._d))
        if rc < 0:
            _hot_fail(rc, "release (layer %d, expert %d)" % (self._d.layer, self._d.expert))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        try:
            if self._d.held and self._stream._h is not None:
                self.release()
        except Exception:
            pass

    def __repr__(self):
        return "<smoe_stream.Blob layer %d expert %d, %d bytes%s>" % (
            self._d.layer, self._d.expert, self._d.size, "" if self._d.held else ", released")
