"""The binding's whole API against the real library: open options, prefetch,
claim, release, views, queries, errors, use after release."""
import ctypes
import os
import re
import threading

import numpy as np
import pytest
import torch

import smoe_stream
from smoe_stream import _lib
from conftest import BF16, F16, F32, I8, blob_bytes, open_stream, write_vault

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "smoe", "smoe.h")


def header_fields(struct):
    """Field names of a struct in smoe.h, in order."""
    src = open(HEADER).read()
    body = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (struct, struct), src, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        m = re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", decl.strip())
        if m and decl.strip():
            names.append(m.group(1))
    return names


@pytest.mark.parametrize("struct,cls", [
    ("smoe_open_opts", _lib.OpenOpts), ("smoe_stats", _lib.Stats),
    ("smoe_ring_region", _lib.RingRegion), ("smoe_vault_info", _lib.VaultInfo),
    ("smoe_component", _lib.Component), ("smoe_blob", _lib.BlobDesc),
    ("smoe_writer_opts", _lib.WriterOpts)])
def test_structs_mirror_header(struct, cls):
    assert [f for f, _ in cls._fields_] == header_fields(struct)


def test_struct_size_follows_library_version():
    for cls in (_lib.OpenOpts, _lib.Stats, _lib.RingRegion, _lib.VaultInfo):
        assert cls.struct_size_for(_lib.VERSION) == ctypes.sizeof(cls)
        # a library older than every field knows only struct_size
        assert cls.struct_size_for(0) == ctypes.sizeof(ctypes.c_size_t)


def test_error_codes_match_header():
    src = open(HEADER).read()
    want = {"SMOE_" + n: int(v) for n, v in re.findall(r"X\((E\w+),\s*(-\d+),", src)}
    assert smoe_stream.codes == want
    assert smoe_stream.error_name(-12) == "SMOE_ETRUNC"


def test_library_and_version():
    assert smoe_stream.library_version == "%d.%d.%d" % (
        _lib.VERSION // 10000, _lib.VERSION // 100 % 100, _lib.VERSION % 100)
    if os.environ.get("SMOE_STREAM_LIBRARY"):
        assert smoe_stream.library_path == os.environ["SMOE_STREAM_LIBRARY"]
    assert smoe_stream.dtype_name(BF16) == "bf16"


def test_package_version_is_the_library_version():
    """One version: the package's (smoe_stream/__init__.py, which
    pyproject.toml reads) is the library's, as CMakeLists.txt's project()
    sets it and smoe_version_string() reports it."""
    here = os.path.dirname(__file__)
    cmake = open(os.path.join(here, "..", "..", "CMakeLists.txt")).read()
    project = re.search(r"project\(smoe_stream VERSION (\d+\.\d+\.\d+)", cmake).group(1)
    assert smoe_stream.__version__ == project == smoe_stream.library_version
    pyproject = open(os.path.join(here, "..", "pyproject.toml")).read()
    assert 'version = {attr = "smoe_stream.__version__"}' in pyproject
    assert not os.path.exists(os.path.join(here, "..", "setup.py"))


def test_roundtrip_every_expert(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p, 3, 5)
    with open_stream(p) as s:
        assert (s.layers, s.experts) == (3, 5)
        for l in range(3):
            for e in range(5):
                assert s.prefetch(l, e) in (smoe_stream.QUEUED, smoe_stream.INFLIGHT,
                                            smoe_stream.RESIDENT)
        for l in range(3):
            for e in range(5):
                with s.claim(l, e) as b:
                    assert (b.layer, b.expert, b.size) == (l, e, size)
                    assert bytes(b.buffer) == blob_bytes(l, e, size).tobytes()
                    assert b.status in (smoe_stream.READY, smoe_stream.HIT)
        st = s.stats()
        assert st["claims"] == 15 and st["releases"] == 15


def test_second_claim_is_a_hit(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p)
    with open_stream(p) as s:
        with s.claim(1, 1) as b:
            assert b.status == smoe_stream.READY
        assert s.prefetch(1, 1) == smoe_stream.RESIDENT
        with s.claim(1, 1) as b:
            assert b.status == smoe_stream.HIT
        assert s.stats()["claim_hits"] == 1


def test_views_dtypes_and_zero_copy(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p)
    with open_stream(p) as s:
        with s.claim(2, 3) as b:
            raw = blob_bytes(2, 3, size)
            g = b.numpy("gate")
            try:
                import ml_dtypes  # noqa: F401
                assert g.dtype.name == "bfloat16"
                g = g.view(np.uint16)
            except ImportError:
                assert g.dtype == np.uint16
            assert g.shape == (8, 16)
            assert g.tobytes() == raw[:256].tobytes()
            assert g.ctypes.data == b.address  # zero-copy: the ring itself
            assert not g.flags.writeable
            u = b.numpy("up")
            assert u.dtype == np.float16 and u.tobytes() == raw[256:512].tobytes()
            d = b.numpy("down")
            assert d.dtype == np.float32 and d.shape == (16, 8)
            sc = b.numpy("scales")
            assert sc.dtype == np.int8 and sc.shape == (7,)
            assert b.numpy().shape == (size,)

            tg = b.torch("gate")
            assert tg.dtype == torch.bfloat16 and tuple(tg.shape) == (8, 16)
            assert tg.data_ptr() == b.address
            assert tg.view(torch.int16).numpy().tobytes() == raw[:256].tobytes()
            td = b.torch("down")
            assert td.numpy().tobytes() == d.tobytes()  # random bits: NaNs among them
            assert b.torch().numel() == size
            ring = s.ring_region()
            assert ring["base"] <= b.address < ring["base"] + ring["length"]
            assert b.address - ring["base"] == b.ring_offset
            assert [c.name for c in b.components] == ["gate", "up", "down", "scales"]


def test_use_after_release_raises(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p)
    with open_stream(p) as s:
        b = s.claim(0, 0)
        mv = b.buffer
        mv[0]
        b.release()
        assert b.released
        with pytest.raises(ValueError):
            mv[0]  # the memoryview was released with the blob
        for use in (lambda: b.buffer, lambda: b.numpy("gate"), lambda: b.torch("gate"),
                    lambda: b.address, lambda: b.components):
            with pytest.raises(smoe_stream.InvalidArgument) as ei:
                use()
            assert ei.value.code == -1 and ei.value.name == "SMOE_EINVAL"
            assert "released" in ei.value.message
        b.release()  # idempotent
        assert s.stats()["releases"] == 1


def test_nonblocking_claim(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p)
    with open_stream(p) as s:
        with pytest.raises(smoe_stream.WouldBlock) as ei:
            s.claim(0, 4, timeout=0)
        assert ei.value.name == "SMOE_ENOTRESIDENT"
        assert "claim (layer 0, expert 4)" in str(ei.value)
        s.prefetch(0, 4)
        with s.claim(0, 4, timeout=5) as b:  # waits up to 5 s
            assert b.expert == 4
        with s.claim(0, 4, timeout=0) as b:  # retained now: no wait
            assert b.status == smoe_stream.HIT


def test_not_found(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    with open_stream(p) as s:
        for call in (lambda: s.claim(3, 0), lambda: s.prefetch(0, 5), lambda: s.cancel(9, 9)):
            with pytest.raises(smoe_stream.NotFound) as ei:
                call()
            assert ei.value.code == smoe_stream.codes["SMOE_ENOENT"]
            assert p in ei.value.message  # the library names the vault
            assert isinstance(ei.value, LookupError)
        with pytest.raises(smoe_stream.NotFound):
            s.component(0, "nope")
        with pytest.raises(smoe_stream.SmoeError):
            s.layout(7)


def test_bad_vaults(tmp):
    missing = str(tmp / "missing.smoe")
    with pytest.raises(smoe_stream.SmoeError) as ei:
        smoe_stream.Stream(missing)
    assert missing in ei.value.message and ei.value.code < 0

    junk = tmp / "junk.smoe"
    junk.write_bytes(b"not a vault" * 1000)
    with pytest.raises(smoe_stream.VaultError) as ei:
        smoe_stream.Stream(str(junk))
    assert ei.value.name == "SMOE_EMAGIC" and str(junk) in ei.value.message

    good = tmp / "good.smoe"
    write_vault(str(good))
    data = good.read_bytes()
    cut = tmp / "cut.smoe"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(smoe_stream.VaultError) as ei:
        smoe_stream.Stream(str(cut), flags=smoe_stream.OPEN_ALLOW_BUFFERED)
    assert str(cut) in ei.value.message

    flipped = bytearray(data)
    flipped[40] ^= 0xFF  # inside the header: its checksum no longer holds
    bad = tmp / "flip.smoe"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(smoe_stream.VaultError) as ei:
        smoe_stream.Stream(str(bad), flags=smoe_stream.OPEN_ALLOW_BUFFERED)
    assert ei.value.code < 0 and str(bad) in ei.value.message


def test_options(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    logs = []
    with open_stream(p, workers=3, ring_slots=6, verify=smoe_stream.VERIFY_ON,
                     eviction=smoe_stream.EVICT_LRU, top_k=2, chunk_bytes=16384,
                     spec_chunk_bytes=16384, spec_share_pct=50, prewarm_pause_us=100,
                     reserve_bytes=1 << 20, scout_bytes=4096, slot_bytes=32768,
                     freq_path=str(tmp / "hist.freq"), trace_path=None,
                     log_fn=lambda lvl, msg: logs.append((lvl, msg))) as s:
        st = s.stats()
        assert st["workers"] == 3 and st["slots"] == 6 and st["verify"] == 1
        assert st["eviction"] == smoe_stream.EVICT_LRU and st["top_k"] == 2
        assert st["slot_bytes"] == 32768 and st["chunk_bytes"] == 16384
        with s.claim(0, 0):
            pass
        s.freq_save()
    assert os.path.exists(str(tmp / "hist.freq"))
    with pytest.raises(smoe_stream.InvalidArgument) as ei:
        smoe_stream.Stream(p, no_such_option=1)
    assert "no_such_option" in str(ei.value)
    with pytest.raises(smoe_stream.InvalidArgument):
        smoe_stream.Stream(p, flags=1 << 30)
    with pytest.raises(smoe_stream.RingTooSmall) as ei:
        open_stream(p, ring_slots=1, top_k=2)
    assert ei.value.name == "SMOE_ESMALLRING"


def test_log_fn_receives_messages(tmp):
    # A ring under one token's experts (3 layers x top-2 > 4 slots): the
    # library warns through log_fn, from the opening thread.
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    logs = []
    with open_stream(p, ring_slots=4, top_k=2,
                     log_fn=lambda lvl, msg: logs.append((lvl, msg))) as s:
        assert s.stats()["cliff"] == 1
    assert any(lvl == 1 and "less than one token" in msg for lvl, msg in logs), logs
    # a callback that raises does not unwind into the library
    def bad(level, msg):
        raise RuntimeError("from the callback")
    with open_stream(p, ring_slots=4, top_k=2, log_fn=bad) as s:
        assert s.stats()["slots"] == 4


def test_queries(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p, 3, 5, meta={"arch": "qwen3_moe", "top_k": "2", "quant": "bf16"})
    with open_stream(p) as s:
        vi = s.vault_info()
        assert (vi["layers"], vi["experts"], vi["layouts"], vi["top_k"]) == (3, 5, 1, 2)
        assert vi["max_padded"] == 16384 and vi["total_padded"] == 15 * 16384
        assert vi["file_size"] == os.path.getsize(p)
        lay = s.layout(0)
        assert [(c.name, c.dtype_name, c.shape) for c in lay] == [
            ("gate", "bf16", (8, 16)), ("up", "f16", (8, 16)), ("down", "f32", (16, 8)),
            ("scales", "i8", (7,))]
        assert s.component(0, "down").offset == 512
        assert s.meta("arch") == "qwen3_moe" and s.meta("nope") is None
        assert s.meta() == {"arch": "qwen3_moe", "top_k": "2", "quant": "bf16"}
        r = s.ring_region()
        assert r["length"] == r["slots"] * r["slot_stride"] and r["base"] % 16384 == 0
        st = s.stats()
        assert set(st) == set(_lib._STATS_U64 + _lib._STATS_U64_1_1)
        assert st["slots"] == r["slots"]
        s.set_busy(True)
        s.set_busy(False)
        assert size <= r["slot_stride"]


def test_cancel(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    with open_stream(p) as s:
        assert s.cancel(0, 0) is False  # nothing queued
        with s.claim(0, 1):
            pass
        assert s.cancel(0, 1) is False  # READY, not queued


def test_prefetch_hint(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p, 3, 5)
    with open_stream(p) as s:
        assert s.prefetch_hint(1, 2, 0.9) in (smoe_stream.QUEUED, smoe_stream.INFLIGHT)
        with s.claim(1, 2) as b:
            assert bytes(b.buffer) == blob_bytes(1, 2, size).tobytes()
        assert s.prefetch_hint(1, 2, 0.25) == smoe_stream.RESIDENT
        assert s.prefetch_hint(2, 4, 0.0) in (smoe_stream.QUEUED, smoe_stream.INFLIGHT)
        assert s.prefetch_hint(0, 0, 1.0) in (smoe_stream.QUEUED, smoe_stream.INFLIGHT)
        for bad in (-0.01, 1.01, float("nan")):
            with pytest.raises(smoe_stream.InvalidArgument) as ei:
                s.prefetch_hint(0, 1, bad)
            assert "layer 0, expert 1" in ei.value.message and "[0, 1]" in ei.value.message
        with pytest.raises(smoe_stream.NotFound):
            s.prefetch_hint(3, 0, 0.5)
        with pytest.raises(smoe_stream.NotFound):
            s.prefetch_hint(0, 5, 0.5)
        st = s.stats()
        assert st["prefetch_hint"] == 4  # the refused calls are not counted
        assert st["prefetch_spec"] == 0  # hints are counted apart from plain speculation


def test_warmup(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    with open_stream(p) as s:
        n = s.warmup()
        assert n == 15
        s.warmup_wait()
        st = s.stats()
        assert (st["warmup_running"], st["warmup_experts"], st["warmup_loaded"]) == (0, 15, 15)
        assert st["warmup_bytes"] > 0
        s.warmup_cancel()  # none runs: nothing to do
        assert s.warmup() == 0  # every expert resident already
        with s.claim(2, 4):
            pass


def test_shutdown_and_close(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p)
    s = open_stream(p)
    held = s.claim(0, 0)
    with pytest.raises(smoe_stream.Busy) as ei:
        s.close()
    assert ei.value.name == "SMOE_EBUSY" and not s.closed
    s.shutdown()
    with pytest.raises(smoe_stream.Shutdown):
        s.claim(0, 1)
    with pytest.raises(smoe_stream.Shutdown):
        s.prefetch(0, 1)
    assert held.numpy("gate").shape == (8, 16)  # claimed blobs stay valid
    held.release()
    s.close()
    s.close()  # idempotent
    assert s.closed
    with pytest.raises(smoe_stream.InvalidArgument):
        s.claim(0, 0)
    with pytest.raises(smoe_stream.InvalidArgument):
        s.stats()

    f = open_stream(p, flags=smoe_stream.OPEN_FORCE_CLOSE | smoe_stream.OPEN_ALLOW_BUFFERED)
    b = f.claim(1, 1)
    f.close()  # forced while held
    with pytest.raises(smoe_stream.InvalidArgument):
        b.release()


def test_claim_from_threads(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p, 3, 5)
    errors = []
    with open_stream(p, workers=4) as s:
        def worker(seed):
            rng = np.random.default_rng(seed)
            try:
                for _ in range(200):
                    l, e = int(rng.integers(3)), int(rng.integers(5))
                    with s.claim(l, e) as b:
                        if b.numpy()[:64].tobytes() != blob_bytes(l, e, size)[:64].tobytes():
                            errors.append((l, e))
            except Exception as ex:  # pragma: no cover - reported below
                errors.append(ex)
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert s.stats()["claims"] == 800
    assert errors == []


def test_writer_errors(tmp):
    with pytest.raises(smoe_stream.SmoeError) as ei:
        smoe_stream.Writer(str(tmp / "x.smoe"), 0, 4)
    assert ei.value.code < 0
    w = smoe_stream.Writer(str(tmp / "y.smoe"), 1, 1)
    with pytest.raises(smoe_stream.SmoeError):
        w.add_layout([("gate", BF16, (4,), 3, 8)])  # offset not aligned
    w.abort()
    assert not os.path.exists(str(tmp / "y.smoe"))


def test_replicas(tmp):
    """A copy of the vault read alongside it (docs/replicas.md); another
    vault of the same shape is refused, naming it."""
    p, q, other = str(tmp / "r.smoe"), str(tmp / "r-copy.smoe"), str(tmp / "o.smoe")
    write_vault(p, 3, 5)
    with open(p, "rb") as f, open(q, "wb") as g:
        g.write(f.read())
    with open_stream(p, replicas=[q], replica_retry_ms=10) as s:
        for layer in range(3):
            for e in range(5):
                with s.claim(layer, e) as b:
                    assert bytes(b.buffer) == blob_bytes(layer, e, b.size).tobytes()
        assert s.stats()["reads_failed"] == 0
    write_vault(other, 3, 5, meta={"x": "y"})
    with pytest.raises(smoe_stream.InvalidArgument) as ei:
        open_stream(p, replicas=[other])
    assert other in ei.value.message and "not a copy" in ei.value.message
