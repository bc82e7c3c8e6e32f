"""smoe_stream: stream Mixture-of-Experts expert weights from a vault.

A pure-Python binding (ctypes) of libsmoe_stream. It loads the installed
libsmoe_stream.so.1, or the library named by the environment variable
SMOE_STREAM_LIBRARY.

    with smoe_stream.Stream("model.smoe", workers=8) as s:
        s.prefetch(layer, expert)
        with s.claim(layer, expert) as blob:
            gate = blob.torch("gate")      # zero-copy, bf16 -> torch.bfloat16

smoe_stream.torch has plain-PyTorch pieces (an expert store, a MoE expert
runner); smoe_stream.hf.stream_experts patches a transformers model.
"""
from . import _lib
from .errors import (SmoeError, InvalidArgument, OutOfMemory, NotFound, ReadError,
                     VaultError, ChecksumError, TruncatedError, WouldBlock, Timeout,
                     Shutdown, Busy, RingTooSmall, NotSupported, SystemCallError,
                     error_name, codes)
from .stream import (Stream, Blob, Component, OPEN_ALLOW_BUFFERED, OPEN_BUFFERED,
                     OPEN_MLOCK, OPEN_FORCE_CLOSE, OPEN_NO_PREWARM, OPEN_NO_FREQ,
                     OPEN_SHAREABLE,
                     VERIFY_DEFAULT, VERIFY_ON, VERIFY_OFF, EVICT_DEFAULT, EVICT_LRU,
                     EVICT_REUSE, QUEUED, RESIDENT, INFLIGHT, SKIPPED, READY, HIT)
from .writer import Writer
from ._arrays import DT as DTYPES

__version__ = "1.1.0"  # the library's version: CMakeLists.txt project()
library_path = _lib.path
library_version = _lib.version_string().decode()


def dtype_name(dtype):
    """The library's name of a component dtype ("bf16", "ggml:q4_K")."""
    return _lib.dtype_name(dtype).decode()
