"""Error paths that need the library's fault seam (tests/fault_io.c): a failed
read reaches claim as ReadError, never a hang, and a later prefetch retries
it; a held read times a claim out. Each case runs in a process of its own
that loads the test-only libsmoe_stream_pyfault.so (SMOE_PYFAULT_LIBRARY)
as its libsmoe_stream. Corrupt data (checksums) needs no seam."""
import os
import subprocess
import sys

import pytest

import smoe_stream
from conftest import blob_bytes, open_stream, write_vault

HERE = os.path.dirname(os.path.abspath(__file__))

# enum fio_mode and fio_call (tests/fault_io.h)
FIO_FAIL_FROM, FIO_PREAD = 2, 2
EIO = 5


def run_with_faults(code, vault):
    shim = os.environ.get("SMOE_PYFAULT_LIBRARY")
    if not shim:
        pytest.skip("SMOE_PYFAULT_LIBRARY is not set (ctest builds and sets it)")
    env = dict(os.environ, SMOE_STREAM_LIBRARY=shim,
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, ".."), HERE]))
    prelude = (
        "import ctypes, smoe_stream\n"
        "from smoe_stream import _lib\n"
        "from conftest import open_stream, blob_bytes\n"
        "F = _lib.lib\n"
        "F.pyfault_arm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_int,"
        " ctypes.c_ulonglong]\n"
        "F.pyfault_fired.restype = ctypes.c_ulonglong\n"
        "F.pyfault_install()\n"
        "vault = %r\n" % vault)
    r = subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_failed_read_raises_read_error_then_retries(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = run_with_faults("""
s = open_stream(vault)
F.pyfault_arm(%d, %d, 1, %d, 0)      # every read from now on fails with EIO
try:
    s.claim(1, 2, timeout=10)
    raise SystemExit("claim succeeded over a failed read")
except smoe_stream.ReadError as e:
    assert e.code == smoe_stream.codes["SMOE_EIO"] and e.name == "SMOE_EIO", e
    assert "layer 1, expert 2" in e.message, e.message
    print("first:", e)
assert F.pyfault_fired() >= 1
# the failure stays until a prefetch retries the expert
try:
    s.claim(1, 2, timeout=0)
    raise SystemExit("a failed read was claimed")
except smoe_stream.ReadError as e:
    print("again:", e.name)
st = s.stats()
assert st["reads_failed"] >= 1, st
F.pyfault_disarm()
s.prefetch(1, 2)
with s.claim(1, 2, timeout=10) as b:
    assert bytes(b.buffer[:64]) == blob_bytes(1, 2, b.size)[:64].tobytes()
print("retried: ok")
s.close()
""" % (FIO_FAIL_FROM, FIO_PREAD, EIO), p)
    assert "first: SMOE_EIO" in out and "again: SMOE_EIO" in out and "retried: ok" in out


def test_held_read_times_out(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = run_with_faults("""
s = open_stream(vault)
F.pyfault_hold(1)                     # reads wait until released
try:
    s.claim(0, 1, timeout=0.2)
    raise SystemExit("claim returned while its read was held")
except smoe_stream.Timeout as e:
    assert isinstance(e, TimeoutError) and e.name == "SMOE_ETIMEDOUT", e
    print("timeout:", e.name)
F.pyfault_hold(0)
with s.claim(0, 1, timeout=10) as b:
    print("then:", b.expert)
s.close()
""", p)
    assert "timeout: SMOE_ETIMEDOUT" in out and "then: 1" in out


def test_contradicted_hint_cancelled(tmp):
    """Hints queue behind a held demand read; layer 1's demand asks for one
    of them; layer 2's first demand prefetch cancels the other, unread."""
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    out = run_with_faults("""
s = open_stream(vault, workers=1, eviction=smoe_stream.EVICT_REUSE)
F.pyfault_hold(1)
assert s.prefetch(0, 0) == smoe_stream.QUEUED
import time
t = time.monotonic()
while F.pyfault_holding() == 0 and time.monotonic() - t < 10:
    time.sleep(0.001)
assert s.prefetch_hint(1, 1, 0.8) == smoe_stream.QUEUED
assert s.prefetch_hint(1, 2, 0.6) == smoe_stream.QUEUED
assert s.prefetch(1, 1) == smoe_stream.INFLIGHT     # layer 1's demand joins its hint
assert s.stats()["hint_cancelled"] == 0
assert s.prefetch(2, 0) == smoe_stream.QUEUED       # layer 1's demand set is complete
assert s.stats()["hint_cancelled"] == 1
try:
    s.claim(1, 2, timeout=0)
    raise SystemExit("the contradicted hint's read was not cancelled")
except smoe_stream.WouldBlock as e:
    assert e.name == "SMOE_ENOTRESIDENT", e
F.pyfault_hold(0)
for l, e in ((0, 0), (1, 1), (2, 0)):
    with s.claim(l, e, timeout=10):
        pass
s.close()
print("cancelled: ok")
""", p)
    assert "cancelled: ok" in out


def test_corrupt_blob_raises_checksum_error(tmp):
    p = str(tmp / "v.smoe")
    size = write_vault(p, 2, 3)
    data = bytearray(open(p, "rb").read())
    at = data.find(blob_bytes(1, 1, size)[:64].tobytes())
    assert at > 0
    data[at + 10] ^= 0x55
    open(p, "wb").write(bytes(data))
    with open_stream(p, verify=smoe_stream.VERIFY_ON) as s:
        with pytest.raises(smoe_stream.ChecksumError) as ei:
            s.claim(1, 1, timeout=10)
        assert ei.value.name == "SMOE_ECHECKSUM" and isinstance(ei.value, smoe_stream.ReadError)
        with s.claim(1, 0) as b:  # the others are fine
            assert bytes(b.buffer[:64]) == blob_bytes(1, 0, size)[:64].tobytes()
