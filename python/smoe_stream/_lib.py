"""Loading libsmoe_stream and describing its C interface to ctypes.

Only the library's public header (include/smoe/smoe.h) is mirrored here.
Structs that may grow carry `struct_size` first; each field below names the
release that added it, so the binding hands an older library a struct_size
it knows and never reads a field that library did not fill.
"""
import ctypes
import ctypes.util
import os
import sys

ABI_MAJOR = 1

_ENV = "SMOE_STREAM_LIBRARY"


def _candidates():
    env = os.environ.get(_ENV)
    if env:
        return [env], True
    names = []
    if sys.platform == "darwin":
        names.append("libsmoe_stream.%d.dylib" % ABI_MAJOR)
    else:
        names.append("libsmoe_stream.so.%d" % ABI_MAJOR)
    found = ctypes.util.find_library("smoe_stream")
    if found:
        names.append(found)
    # cmake --install's default prefix, which ld.so may not search before
    # ldconfig has run.
    for d in ("/usr/local/lib", "/usr/local/lib64", "/opt/homebrew/lib"):
        names.append(os.path.join(d, names[0]))
    return names, False


def _load():
    names, from_env = _candidates()
    errors = []
    for n in names:
        try:
            return ctypes.CDLL(n), n
        except OSError as e:
            errors.append("%s: %s" % (n, e))
    if from_env:
        raise ImportError("smoe_stream: %s=%s cannot be loaded: %s"
                          % (_ENV, names[0], errors[0]))
    raise ImportError(
        "smoe_stream: libsmoe_stream.so.%d not found (tried %s). Install the "
        "library (cmake --install build; then ldconfig) or set %s to its path."
        % (ABI_MAJOR, ", ".join(names), _ENV))


lib, path = _load()

c_size = ctypes.c_size_t
u32 = ctypes.c_uint32
u64 = ctypes.c_uint64
vp = ctypes.c_void_p
cp = ctypes.c_char_p

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


def _versioned(name, fields):
    """A ctypes Structure from (field, type, since) rows, since as 10000*major +
    100*minor + patch. struct_size_for(v) is the struct_size a library of
    version v knows: the end of the last field it has."""
    cls = type(name, (ctypes.Structure,),
               {"_fields_": [("struct_size", c_size)] + [(f, t) for f, t, _ in fields]})
    cls.since = {f: s for f, _, s in fields}

    def struct_size_for(version):
        end = ctypes.sizeof(c_size)
        for f, _, s in fields:
            if s <= version:
                end = getattr(cls, f).offset + getattr(cls, f).size
        # the C struct is padded to its alignment
        align = ctypes.alignment(cls)
        return (end + align - 1) // align * align
    cls.struct_size_for = staticmethod(struct_size_for)
    return cls


V1_0 = 10000
V1_1 = 10100
i32 = ctypes.c_int32

OpenOpts = _versioned("smoe_open_opts", [
    ("workers", u32, V1_0), ("ring_slots", u32, V1_0), ("slot_bytes", u64, V1_0),
    ("flags", u32, V1_0), ("verify", u32, V1_0), ("spec_share_pct", u32, V1_0),
    ("top_k", u32, V1_0), ("reserve_bytes", u64, V1_0), ("scout_bytes", u64, V1_0),
    ("scout_path", cp, V1_0), ("freq_path", cp, V1_0), ("trace_path", cp, V1_0),
    ("prewarm_pause_us", u32, V1_0), ("eviction", u32, V1_0), ("chunk_bytes", u32, V1_0),
    ("spec_chunk_bytes", u32, V1_0), ("log_fn", LOG_FN, V1_0), ("log_user", vp, V1_0),
    ("replicas", ctypes.POINTER(cp), V1_1), ("n_replicas", u32, V1_1),
    ("replica_retry_ms", u32, V1_1),
])

_STATS_U64 = """prefetch_demand prefetch_spec hits joins misses spec_queued spec_skipped
spec_upgraded spec_cancelled spec_used spec_wasted_bytes full reads_done reads_failed
bytes_read evictions claims claim_hits claim_waits claim_wait_ns releases slots
slot_bytes ring_bytes slots_empty slots_loading slots_ready slots_retained
slots_referenced slots_failed io_mode verify workers worker_parks worker_wakes
chunk_bytes chunks_read ready_demand ready_demand_p50_ns ready_demand_p99_ns ready_spec
ready_spec_p50_ns ready_spec_p99_ns budget_rules budget_mem_total budget_mem_available
budget_cgroup_limit budget_cgroup_usage budget_free budget_scout budget_overhead
budget_reserve budget_os_floor budget_bytes budget_slots top_k working_set_slots cliff
freq_status freq_saving freq_saves freq_save_errors prewarm_slots prewarm_passes
prewarm_reads prewarm_hits spec_chunk_bytes eviction evict_scans evict_scanned
evict_rescored reuse_examples""".split()

_STATS_U64_1_1 = """warmup_running warmup_experts warmup_loaded warmup_failed warmup_bytes
warmup_ns warmup_bytes_per_s prefetch_hint hint_cancelled""".split()

Stats = _versioned("smoe_stats", [(f, u64, V1_0) for f in _STATS_U64] +
                   [(f, u64, V1_1) for f in _STATS_U64_1_1])

RingRegion = _versioned("smoe_ring_region", [
    ("base", vp, V1_0), ("length", u64, V1_0), ("slot_stride", u64, V1_0),
    ("slots", u32, V1_0), ("reserved0_", u32, V1_0),
    ("fd", i32, V1_1), ("reserved1_", u32, V1_1), ("fd_offset", u64, V1_1),
])

VaultInfo = _versioned("smoe_vault_info", [
    ("layers", u32, V1_0), ("experts", u32, V1_0), ("layouts", u32, V1_0),
    ("top_k", u32, V1_0), ("max_padded", u64, V1_0), ("total_padded", u64, V1_0),
    ("file_size", u64, V1_0), ("vault_id", u64, V1_0),
])

COMPONENT_NAME_MAX = 64
MAX_DIMS = 4


class Component(ctypes.Structure):
    """smoe_component: fixed size, no struct_size."""
    _fields_ = [("name", ctypes.c_char * COMPONENT_NAME_MAX), ("dtype", u32), ("ndim", u32),
                ("shape", u64 * MAX_DIMS), ("offset", u64), ("nbytes", u64),
                ("quant_group", u32), ("quant_bits", u32)]


class BlobDesc(ctypes.Structure):
    """smoe_blob: filled by claim, handed back to release."""
    _fields_ = [("data", vp), ("size", u64), ("ring_offset", u64), ("layer", u32),
                ("expert", u32), ("layout", u32), ("slot", u32), ("gen", u32), ("held", u32),
                ("reserved_", u64 * 2)]


class WriterOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size), ("layers", u32), ("experts", u32),
                ("component_align", u32), ("reserved0_", u32)]


S = ctypes.c_void_p  # smoe_stream *
W = ctypes.c_void_p  # smoe_writer *


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


c_int = ctypes.c_int
strerror = _fn("smoe_strerror", cp, c_int)
err_name = _fn("smoe_err_name", cp, c_int)
last_error = _fn("smoe_last_error", cp)
version_number = _fn("smoe_version_number", ctypes.c_uint)
version_string = _fn("smoe_version_string", cp)
dtype_name = _fn("smoe_dtype_name", cp, u32)
open_opts_init = _fn("smoe_open_opts_init", None, ctypes.POINTER(OpenOpts))
open_ = _fn("smoe_open", c_int, cp, ctypes.POINTER(OpenOpts), ctypes.POINTER(S))
shutdown = _fn("smoe_shutdown", c_int, S)
close = _fn("smoe_close", c_int, S)
prefetch = _fn("smoe_prefetch", c_int, S, u32, u32, ctypes.c_uint)
cancel = _fn("smoe_cancel", c_int, S, u32, u32)
claim = _fn("smoe_claim", c_int, S, u32, u32, ctypes.POINTER(BlobDesc))
claim_wait = _fn("smoe_claim_wait", c_int, S, u32, u32, u64, ctypes.POINTER(BlobDesc))
release = _fn("smoe_release", c_int, S, ctypes.POINTER(BlobDesc))
set_busy = _fn("smoe_set_busy", c_int, S, c_int)
# since 1.1; opts NULL: the defaults
warmup = _fn("smoe_warmup", c_int, S, vp)
warmup_wait = _fn("smoe_warmup_wait", c_int, S, u64)
warmup_cancel = _fn("smoe_warmup_cancel", c_int, S)
prefetch_hint = _fn("smoe_prefetch_hint", c_int, S, u32, u32, ctypes.c_float)
freq_save = _fn("smoe_freq_save", c_int, S)
ring_region_get = _fn("smoe_ring_region_get", c_int, S, ctypes.POINTER(RingRegion))
vault_info_get = _fn("smoe_vault_info_get", c_int, S, ctypes.POINTER(VaultInfo))
layout_count = _fn("smoe_layout_count", c_int, S, u32)
layout_component = _fn("smoe_layout_component", c_int, S, u32, u32, ctypes.POINTER(Component))
layout_find = _fn("smoe_layout_find", c_int, S, u32, cp, ctypes.POINTER(Component))
meta_get = _fn("smoe_meta_get", cp, S, cp)
get_stats = _fn("smoe_get_stats", c_int, S, ctypes.POINTER(Stats))
writer_open = _fn("smoe_writer_open", c_int, cp, ctypes.POINTER(WriterOpts), ctypes.POINTER(W))
writer_add_layout = _fn("smoe_writer_add_layout", c_int, W, ctypes.POINTER(Component), u32,
                        ctypes.POINTER(u32))
writer_set_meta = _fn("smoe_writer_set_meta", c_int, W, cp, cp)
writer_add_blob = _fn("smoe_writer_add_blob", c_int, W, u32, u32, u32, vp, u64)
writer_finish = _fn("smoe_writer_finish", c_int, W)
writer_abort = _fn("smoe_writer_abort", None, W)

VERSION = version_number()
if VERSION // 10000 != ABI_MAJOR:
    raise ImportError("smoe_stream: %s is version %s; this binding needs ABI %d.x"
                      % (path, version_string().decode(), ABI_MAJOR))
