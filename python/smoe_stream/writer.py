"""Writer: smoe_writer_*, for vaults made from Python (tests, converters)."""
import ctypes

from . import _check, _lib
from .errors import raise_for


class Writer:
    """Write a vault. add_layout() takes components as (name, dtype, shape,
    offset, nbytes) tuples or Component records; the file appears at `path`
    only when finish() succeeds. As a context manager it finishes on a clean
    exit and aborts on an exception."""

    def __init__(self, path, layers, experts, component_align=0):
        self.path = str(path)
        what = "Writer(%r)" % self.path
        c_path = _check.cstr(path, "path", what, path=True)
        o = _lib.WriterOpts(ctypes.sizeof(_lib.WriterOpts), _check.u32(layers, "layers", what),
                            _check.u32(experts, "experts", what),
                            _check.u32(component_align, "component_align", what), 0)
        h = _lib.W()
        raise_for(_lib.writer_open(c_path, ctypes.byref(o), ctypes.byref(h)))
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
            _component(arr[i], c, "add_layout: component %d" % i)
        lid = _lib.u32()
        raise_for(_lib.writer_add_layout(self._handle(), arr, len(components),
                                         ctypes.byref(lid)))
        return lid.value

    def set_meta(self, key, value):
        raise_for(_lib.writer_set_meta(self._handle(), _check.cstr(key, "key", "set_meta"),
                                       _check.cstr(str(value), "value", "set_meta")))

    def add_blob(self, layer, expert, layout, data):
        what = "add_blob"
        layer, expert = _check.u32(layer, "layer", what), _check.u32(expert, "expert", what)
        layout = _check.u32(layout, "layout", what)
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


def _component(out, c, what):
    """Fill smoe_component `out` from (name, dtype, shape, offset, nbytes[,
    quant_group, quant_bits]), each value checked against its C type."""
    name, dtype, shape, offset, nbytes = c[:5]
    b = _check.cstr(name, "name", what)
    if len(b) >= _lib.COMPONENT_NAME_MAX:
        raise _check.bad(what, "name %r is longer than %d bytes" % (name,
                                                                   _lib.COMPONENT_NAME_MAX - 1))
    if len(shape) > _lib.MAX_DIMS:
        raise _check.bad(what, "shape %r has more than %d dimensions" % (tuple(shape),
                                                                        _lib.MAX_DIMS))
    out.name = b
    out.dtype = _check.u32(dtype, "dtype", what)
    out.ndim = len(shape)
    for j, d in enumerate(shape):
        out.shape[j] = _check.u64(d, "shape[%d]" % j, what)
    out.offset = _check.u64(offset, "offset", what)
    out.nbytes = _check.u64(nbytes, "nbytes", what)
    if len(c) > 5:
        out.quant_group = _check.u32(c[5], "quant_group", what)
        out.quant_bits = _check.u32(c[6], "quant_bits", what)
