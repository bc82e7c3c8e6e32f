"""The stream handle and when it may be freed.

smoe_close frees the stream and unmaps its ring; the C API leaves it to the
caller that no call on the handle is running then or made later, and that
nothing reads the ring afterwards. Python objects cannot promise that by
themselves (threads, finalisers in any order, views that outlive a blob), so
Handle owns the pointer and keeps the rules:

- every call into the library goes through call() (or claim(), release()),
  counted under the lock; close() refuses new calls, wakes waiting ones with
  smoe_shutdown, and frees nothing until none is inside;
- every claimed blob is a Claim registered here; it is released once, by its
  Blob or by a close, under the lock, so a Blob finalised after the close
  finds it ended and calls nothing;
- Python reaches ring memory only through one ctypes object (ring()) that
  holds this Handle; memoryviews, numpy arrays and torch tensors made from
  it keep that object alive. smoe_close runs at close() when no such view is
  left, else when the last one is collected: until then the stream is shut
  down (no reads, no calls) but its ring stays mapped, so a view can be read
  but never crashes the interpreter.
"""
import ctypes
import threading
import weakref

from . import _lib
from .errors import Busy, InvalidArgument, codes, raise_for

OPEN, CLOSING, CLOSED = "open", "closing", "closed"


class Claim:
    """A claimed blob: the descriptor the library filled, the memoryviews
    handed out over it, and how it ended (None while held)."""

    __slots__ = ("desc", "views", "ended")

    def __init__(self, desc):
        self.desc = desc
        self.views = []
        self.ended = None  # "released", or "closed" by a close of the stream

    def drop_views(self):
        """Release the memoryviews given out (the derived ones first), so a
        later read raises ValueError instead of reading a reused slot."""
        for v in reversed(self.views):
            try:
                v.release()
            except BufferError:
                pass  # an array made from it lives on, and holds the ring
        self.views = []


class Handle:
    """A smoe_stream pointer, the calls inside it, its claims and its ring."""

    def __init__(self, h, path, force, keep):
        self.h = h
        self.path = path
        self.force = force  # opened with OPEN_FORCE_CLOSE
        self.keep = keep  # strings and the log callback: the library uses them until freed
        # Reentrant: the collector may run a Blob's finaliser (a release)
        # on a thread that holds it.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)  # a close waits on it for _calls 0
        self._state = OPEN
        self._calls = 0  # calls inside the library now
        self._claims = set()
        self._ring = None  # weakref to ring()'s object
        self._freed = False
        self._here = threading.local()  # .calls: this thread's calls inside the library

    @property
    def state(self):
        return self._state

    def _mine(self, n):
        self._here.calls = getattr(self._here, "calls", 0) + n

    def _enter(self):
        with self._lock:
            if self._state == OPEN:
                self._calls += 1
                self._mine(1)
                return
        raise InvalidArgument(codes["SMOE_EINVAL"], "stream %s is closed" % self.path)

    def _leave(self, claim=None):
        with self._lock:
            if claim is not None:  # before the count drops: a waiting close sees it
                self._claims.add(claim)
            self._calls -= 1
            self._mine(-1)
            if not self._calls and self._state != OPEN:
                self._cond.notify_all()

    def call(self, fn, *args):
        """fn(handle, *args), counted as a call in flight."""
        self._enter()
        try:
            return fn(self.h, *args)
        finally:
            self._leave()

    def claim(self, fn, *args):
        """fn(handle, *args, &desc): (rc, a registered Claim or None)."""
        d = _lib.BlobDesc()
        c = None
        self._enter()
        try:
            rc = fn(self.h, *args, ctypes.byref(d))
            if rc >= 0:
                c = Claim(d)
            return rc, c
        finally:
            self._leave(c)

    def release(self, c):
        """Release a claim once: 0, or the library's code. A claim already
        ended (released, or by a close) is left alone."""
        if c.ended:  # read without the lock: the common case of a finaliser
            return 0
        with self._lock:
            if c.ended or c not in self._claims:
                return 0
            self._claims.discard(c)
            c.ended = "released"
            self._calls += 1  # also while a close waits: it waits for this one
            self._mine(1)
        try:
            c.drop_views()
            return _lib.release(self.h, ctypes.byref(c.desc))
        finally:
            self._leave()

    def ring(self):
        """The whole ring as one ctypes object that holds this Handle."""
        with self._cond:
            mem = self._ring() if self._ring else None
        if mem is not None:
            return mem
        r = _lib.RingRegion()
        r.struct_size = _lib.RingRegion.struct_size_for(_lib.VERSION)
        rc = self.call(_lib.ring_region_get, ctypes.byref(r))
        raise_for(rc, "ring %s" % self.path)
        mem = type("RingMemory", (ctypes.c_uint8 * r.length,), {}).from_address(r.base)
        mem.handle = self
        with self._cond:
            old = self._ring() if self._ring else None
            if old is not None:
                return old
            self._ring = weakref.ref(mem)
        return mem

    def _busy(self, why):
        return Busy(codes["SMOE_EBUSY"], "close %s: %d blobs %s; release them first (or open "
                    "with OPEN_FORCE_CLOSE)" % (self.path, len(self._claims), why))

    def close(self, before=None, finalising=False):
        """Close (see the module's comment). Raises Busy while blobs are
        claimed, unless opened with OPEN_FORCE_CLOSE or finalising (the
        Stream is garbage, and so is every Blob of it). before: a callable
        run once nothing can call in any more. Returns the library's code."""
        if getattr(self._here, "calls", 0):
            # A log callback on a thread inside a call: waiting for that
            # call to end would wait for ourselves.
            raise InvalidArgument(codes["SMOE_EINVAL"], "close %s: called from inside a call "
                                  "of this stream on the same thread (a log callback?)" % self.path)
        with self._cond:
            while self._state == CLOSING:
                self._cond.wait()
            if self._state == CLOSED:
                return 0
            keep = self.force or finalising
            if self._claims and not keep:
                raise self._busy("are still claimed")
            self._state = CLOSING
            inside = self._calls
        if inside:
            _lib.shutdown(self.h)  # waiting claims return SMOE_ESHUTDOWN
        with self._cond:
            while self._calls:
                self._cond.wait()
            if self._claims and not keep:
                self._state = OPEN
                self._cond.notify_all()
                raise self._busy("were claimed on other threads while closing (the stream "
                                 "is shut down now)")
            ended, self._claims = self._claims, set()
            for c in ended:
                c.ended = "closed"
        failed = None
        try:
            if before is not None:
                before()
        except Exception as e:  # closes anyway, then raises it
            failed = e
        for c in ended:
            c.drop_views()
            _lib.release(self.h, ctypes.byref(c.desc))
        with self._cond:
            self._state = CLOSED
            self._cond.notify_all()
            mem = self._ring() if self._ring else None
        if mem is None:
            rc = self._free()
        else:
            # Views of the ring live on: keep it mapped until the last goes.
            _lib.shutdown(self.h)
            weakref.finalize(mem, self._free)
            rc = 0
        if failed is not None:
            raise failed
        return rc

    def _free(self):
        with self._cond:
            if self._freed:
                return 0
            self._freed = True
        if isinstance(threading.current_thread(), threading._DummyThread):
            # A library thread (a log callback that ran the collector):
            # smoe_close would join that very thread. Free from another.
            threading.Thread(target=self._close_c, daemon=True).start()
            return 0
        return self._close_c()

    def _close_c(self):
        return _lib.close(self.h)
