"""A stream's lifetime against the Python objects around it: a forced close
with blobs and views outstanding, close racing claims on other threads, a
stream collected in a reference cycle. Each case runs in a process of its
own (run_child), so a crash or a hang is a failed test, not a dead run.

SPY wraps every library call that takes the stream handle: it records a call
made on a handle already freed by smoe_close, and a smoe_close made while
another call on that handle is still inside the library; both are what the
C API forbids, whether or not the process happens to crash."""
from conftest import child_ok, run_child, write_vault

SPY = """
from smoe_stream import _lib
_spy_lock = threading.Lock()
freed, inside, bad = set(), {}, []

def _key(h):
    return getattr(h, "value", h)

def _wrap(name, f):
    def call(h, *args):
        k = _key(h)
        with _spy_lock:
            if k in freed:
                bad.append("%s on a freed stream" % name)
            if name == "smoe_close" and inside.get(k):
                bad.append("smoe_close with %d calls inside the library" % inside[k])
            inside[k] = inside.get(k, 0) + 1
        try:
            rc = f(h, *args)
        finally:
            with _spy_lock:
                inside[k] -= 1
        if name == "smoe_close" and rc == 0:
            with _spy_lock:
                freed.add(k)
        return rc
    return call

for _n in ("shutdown", "close", "prefetch", "cancel", "claim", "claim_wait", "release",
           "set_busy", "warmup", "warmup_wait", "warmup_cancel", "prefetch_hint",
           "freq_save", "ring_region_get", "vault_info_get", "layout_count",
           "layout_component", "layout_find", "meta_get", "get_stats"):
    setattr(_lib, _n, _wrap(getattr(_lib, _n).__name__, getattr(_lib, _n)))
_open = _lib.open_
def _open_spy(path, opts, out):
    rc = _open(path, opts, out)
    if rc == 0:
        with _spy_lock:
            freed.discard(_key(out._obj))
    return rc
_lib.open_ = _open_spy

def counts():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
"""

FORCE = "smoe_stream.OPEN_FORCE_CLOSE | smoe_stream.OPEN_ALLOW_BUFFERED"


def test_force_close_invalidates_blob_views(tmp):
    """After close() with OPEN_FORCE_CLOSE and a blob claimed, every use of
    the blob and of a memoryview taken from blob.buffer raises."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = child_ok(run_child(SPY + """
s = open_stream(vault, flags=%s)
b = s.claim(0, 1)
mv = b.buffer
assert bytes(mv[:16]) == blob_bytes(0, 1, 16).tobytes()
s.close()
print("closed", flush=True)
uses = [("numpy", lambda: b.numpy("gate")), ("numpy whole", b.numpy),
        ("torch", lambda: b.torch("gate")), ("buffer", lambda: b.buffer),
        ("address", lambda: b.address), ("components", lambda: b.components),
        ("memoryview index", lambda: mv[0]), ("memoryview bytes", lambda: bytes(mv)),
        ("release", b.release)]
for name, use in uses:
    print("using", name, flush=True)
    try:
        use()
        print("NO RAISE:", name)
    except smoe_stream.InvalidArgument as e:
        assert "closed" in e.message, e.message
        print("raised:", name, e.name)
    except ValueError as e:  # a released memoryview
        print("raised:", name, type(e).__name__, e)
assert b.released
del b
gc.collect()
assert not bad, bad
""" % FORCE, p))
    assert "NO RAISE" not in out, out
    assert out.count("raised:") == 9, out


def test_arrays_outlive_close_without_crash(tmp):
    """numpy arrays and torch tensors over a blob, taken before a close
    (forced with the blob claimed, or plain after its release), stay
    readable: the ring stays mapped while they live, and the stream's threads
    and descriptors go with the last of them."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = child_ok(run_child(SPY + """
import numpy, torch  # before counting: importing opens descriptors
base = counts()
for force in (True, False):
    s = open_stream(vault, flags=%s if force else smoe_stream.OPEN_ALLOW_BUFFERED)
    b = s.claim(1, 2)
    a, t, mv = b.numpy(), b.torch(), b.buffer
    a2 = mv.cast("B")  # a memoryview made from the blob's memoryview
    want = blob_bytes(1, 2, b.size).tobytes()
    assert a.tobytes() == want
    if not force:
        b.release()
    s.close()
    print("closed, force", force, flush=True)
    assert a.tobytes() == want and bytes(t.numpy()) == want  # still mapped, same bytes
    del b, s, mv, a2
    gc.collect()
    assert a.tobytes() == want and bytes(t.numpy()) == want  # the arrays hold the ring
    del a, t
    gc.collect()
    assert counts() == base, (counts(), base)
    print("freed with the arrays, force", force)
assert not bad, bad
""" % FORCE, p))
    assert "freed with the arrays, force True" in out and "force False" in out


def test_close_waits_for_claims_in_flight(tmp):
    """close() on one thread while six others claim with timeouts in a
    loop: it shuts the stream down, waits until every call inside the
    library has returned, then frees it; the claimers end with Shutdown or
    InvalidArgument (closed), never a crash, a hang or a call on a freed
    stream."""
    p = str(tmp / "v.smoe")
    write_vault(p, 4, 8)
    out = child_ok(run_child(SPY + """
import random
ends = {}
for rnd in range(20):
    s = open_stream(vault, workers=2, ring_slots=4)
    def claimer(seed):
        r = random.Random(seed)
        while True:
            try:
                b = s.claim(r.randrange(4), r.randrange(8), timeout=0.002)
            except (smoe_stream.Timeout, smoe_stream.WouldBlock, smoe_stream.RingTooSmall):
                continue
            except smoe_stream.Shutdown:
                ends["shutdown"] = ends.get("shutdown", 0) + 1
                return
            except smoe_stream.InvalidArgument as e:
                assert "closed" in e.message, e.message
                ends["closed"] = ends.get("closed", 0) + 1
                return
            try:
                b.release()
            except smoe_stream.InvalidArgument:  # closed under it
                pass
    ts = [threading.Thread(target=claimer, args=(rnd * 10 + i,)) for i in range(6)]
    for t in ts:
        t.start()
    time.sleep(0.02)
    while True:
        try:
            s.close()
            break
        except smoe_stream.Busy:  # a claimer holds a blob for a moment
            time.sleep(0.0005)
    for t in ts:
        t.join(30)
        assert not t.is_alive(), "a claimer never returned"
print("ends", ends)
assert not bad, bad[:5]
print("ok")
""", p, timeout=240))
    assert "ok" in out


CYCLE = """
gc.collect()
gc.disable()
base = counts()
for i in range(20):
    s = open_stream(vault, workers=2, ring_slots=32, slot_bytes=512 * 1024, flags=%s)
    b = s.claim(0, i %% 5)
    s.cycle = [s, b]
    del s, b
during = counts()
gc.collect()
after = counts()
print("threads, fds: before", base, "with 20 streams", during, "after gc", after)
assert during[0] >= base[0] + 40, during
assert after == base, (base, after)
assert not bad, bad[:5]
print("ok")
"""


def test_collected_cycle_stream_closed_no_leak(tmp):
    """Twenty streams, each collected in a reference cycle with a claimed
    blob: gc.collect() closes them all (threads and descriptors back to where
    they were)."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 5)
    out = child_ok(run_child(SPY + CYCLE % "smoe_stream.OPEN_ALLOW_BUFFERED", p))
    assert "ok" in out


def test_collected_cycle_force_close_no_release_into_freed_stream(tmp):
    """The same with OPEN_FORCE_CLOSE: the blobs' finalisers never call into
    a stream already freed."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 5)
    out = child_ok(run_child(SPY + CYCLE % FORCE, p))
    assert "ok" in out


def test_blob_finalised_by_collector_under_handle_lock(tmp):
    """The collector can run anywhere a Python object is allocated, also
    while this thread holds the stream's lock (e.g. registering a claim): a
    Blob it finalises there releases without deadlocking on that lock."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = child_ok(run_child(SPY + """
s = open_stream(vault)
b = s.claim(0, 1)
cycle = [b]
cycle.append(cycle)  # only the collector frees it, and the blob with it
del b, cycle
with s._hd._lock:  # where a claim registers itself
    gc.collect()
assert s.stats()["releases"] == 1
s.close()
assert not bad, bad
print("ok")
""", p, timeout=60))
    assert "ok" in out


def test_close_from_inside_a_call_on_the_same_thread_raises(tmp):
    """close() on a thread that is itself inside a call of the stream (as a
    log callback run by that call would be) raises InvalidArgument instead
    of waiting for its own call to end; the stream stays usable and closes
    afterwards."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 4)
    out = child_ok(run_child("""
s = open_stream(vault, workers=1, ring_slots=4)
h = s._hd
seen = []
def inside(handle):
    try:
        s.close()
    except smoe_stream.InvalidArgument as e:
        seen.append(e.message)
    return 0
h.call(inside)
assert seen and "same thread" in seen[0], seen
b = s.claim(0, 1)
b.release()
s.close()
print("ok")
""", p, timeout=60))
    assert "ok" in out
