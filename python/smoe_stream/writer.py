"""Writer: smoe_writer_*, for vaults made from Python (tests, converters)."""
import ctypes

from . import _lib
from .errors import raise_for


class Writer:
    """Write a vault. add_layout() takes components as (name, dtype, shape,
    offset, nbytes) tuples or Component records; the file appears at `path`
    only when finish() succeeds. As a context manager it finishes on a clean
    exit and aborts on an exception."""

    def __init__(self, path, layers, experts, component_align=0):
        self.path = str(path)
        o = _lib.WriterOpts(ctypes.sizeof(_lib.WriterOpts), layers, experts, component_align, 0)
        h = _lib.W()
        raise_for(_lib.writer_open(self.path.encode(), ctypes.byref(o), ctypes.byref(h)))
        self._h = h

    def _handle(self):
        if self._h is None:
            raise ValueError("writer for %s is finished" % self.path)
        return self._h

    def add_layout(self, components):
        arr = (_lib.Component * len(components))()
        for i, c in enumerate(components):
            if hasattr(c, "_asdict"):
                c = (c.name, c.dtype, c.shape, c.offset, c.nbytes, c.quant_group, c.quant_bits)
            name, dtype, shape, offset, nbytes = c[:5]
            arr[i].name = name.encode()
            arr[i].dtype = dtype
            arr[i].ndim = len(shape)
            for j, d in enumerate(shape):
                arr[i].shape[j] = d
            arr[i].offset = offset
            arr[i].nbytes = nbytes
            if len(c) > 5:
                arr[i].quant_group, arr[i].quant_bits = c[5], c[6]
        lid = _lib.u32()
        raise_for(_lib.writer_add_layout(self._handle(), arr, len(components),
                                         ctypes.byref(lid)))
        return lid.value

    def set_meta(self, key, value):
        raise_for(_lib.writer_set_meta(self._handle(), key.encode(), str(value).encode()))

    def add_blob(self, layer, expert, layout, data):
        mv = memoryview(data).cast("B")
        buf = (ctypes.c_uint8 * len(mv)).from_buffer_copy(mv) if mv.readonly else \
            (ctypes.c_uint8 * len(mv)).from_buffer(mv)
        raise_for(_lib.writer_add_blob(self._handle(), layer, expert, layout,
                                       ctypes.addressof(buf), len(mv)))

    def finish(self):
        h, self._h = self._handle(), None
        raise_for(_lib.writer_finish(h))

    def abort(self):
        if self._h is not None:
            _lib.writer_abort(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            _lib.writer_abort(self._h)
