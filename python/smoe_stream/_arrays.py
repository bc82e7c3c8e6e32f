"""Component views: numpy arrays and torch tensors over blob memory."""
DT = dict(BOOL=1, U8=2, I8=3, U16=4, I16=5, F16=6, BF16=7, U32=8, I32=9, F32=10, U64=11,
          I64=12, F64=13, F8_E4M3=14, F8_E5M2=15, MLX_PACKED=0x200)

_NP = {DT["BOOL"]: "bool", DT["U8"]: "uint8", DT["I8"]: "int8", DT["U16"]: "uint16",
       DT["I16"]: "int16", DT["F16"]: "float16", DT["U32"]: "uint32", DT["I32"]: "int32",
       DT["F32"]: "float32", DT["U64"]: "uint64", DT["I64"]: "int64", DT["F64"]: "float64",
       DT["MLX_PACKED"]: "uint32"}


def numpy_dtype(dtype):
    """numpy dtype of a component's element type; None: raw bytes. bf16 and
    fp8 are ml_dtypes' types where ml_dtypes is installed, else uint16 and
    uint8 of the same bits."""
    import numpy as np
    if dtype in _NP:
        return np.dtype(_NP[dtype])
    special = {DT["BF16"]: ("bfloat16", "uint16"), DT["F8_E4M3"]: ("float8_e4m3fn", "uint8"),
               DT["F8_E5M2"]: ("float8_e5m2", "uint8")}
    if dtype in special:
        ml, raw = special[dtype]
        try:
            import ml_dtypes
            return np.dtype(getattr(ml_dtypes, ml))
        except ImportError:
            return np.dtype(raw)
    return None


def torch_dtype(dtype):
    """torch dtype of a component's element type; None: raw bytes. Unsigned
    16/32/64-bit types need torch 2.3 (torch.uint16 ...); older torch gets the
    signed type of the same width, the same bits."""
    import torch
    t = {DT["BOOL"]: "bool", DT["U8"]: "uint8", DT["I8"]: "int8", DT["I16"]: "int16",
         DT["F16"]: "float16", DT["BF16"]: "bfloat16", DT["I32"]: "int32",
         DT["F32"]: "float32", DT["I64"]: "int64", DT["F64"]: "float64",
         DT["F8_E4M3"]: "float8_e4m3fn", DT["F8_E5M2"]: "float8_e5m2",
         DT["U16"]: "uint16", DT["U32"]: "uint32", DT["U64"]: "uint64",
         DT["MLX_PACKED"]: "uint32"}.get(dtype)
    if t is None:
        return None
    fallback = {"uint16": "int16", "uint32": "int32", "uint64": "int64",
                "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
    return getattr(torch, t, None) or getattr(torch, fallback[t])


def _shape(c, itemsize):
    n = 1
    for d in c.shape:
        n *= d
    if n * itemsize == c.nbytes:
        return c.shape
    return None  # packed or quantised: the bytes as they are


def numpy_view(buf, c):
    import numpy as np
    if c is None:
        return np.frombuffer(buf, dtype=np.uint8)
    dt = numpy_dtype(c.dtype)
    shape = _shape(c, dt.itemsize) if dt is not None else None
    if shape is None:
        return np.frombuffer(buf, dtype=np.uint8, count=c.nbytes, offset=c.offset)
    return np.frombuffer(buf, dtype=dt, count=c.nbytes // dt.itemsize,
                         offset=c.offset).reshape(shape)


def torch_view(ring, base, c):
    import torch
    raw = ring[base + c.offset:base + c.offset + c.nbytes]
    dt = torch_dtype(c.dtype)
    shape = _shape(c, torch.empty((), dtype=dt).element_size()) if dt is not None else None
    if shape is None:
        return raw
    return raw.view(dt).view(shape)
