"""What the binding passes to C: an integer the C type cannot hold, a NaN or
negative timeout, a probability outside [0, 1] or a string with a NUL raises
InvalidArgument naming the argument, instead of wrapping (claim(2**32 + 1, 3)
was the blob of layer 1) or being cut short; a timeout too long for the
library's nanoseconds waits without limit."""
import pytest

import smoe_stream
from conftest import open_stream, write_vault
from test_faults import run_with_faults

BIG = 2 ** 32


def _raises_naming(name, call):
    with pytest.raises(smoe_stream.InvalidArgument) as ei:
        call()
    assert ei.value.name == "SMOE_EINVAL"
    assert name in ei.value.message, (name, ei.value.message)
    return ei.value.message


def test_out_of_range_arguments_raise(tmp):
    p = str(tmp / "v.smoe")
    write_vault(p, 3, 5)
    with open_stream(p) as s:
        cases = [
            ("layer", lambda: s.claim(BIG + 1, 3)),
            ("expert", lambda: s.claim(0, BIG + 3, timeout=0)),
            ("layer", lambda: s.claim(-1, 0)),
            ("layer", lambda: s.claim(1.0, 0)),
            ("expert", lambda: s.prefetch(0, BIG + 5)),
            ("layer", lambda: s.prefetch(BIG, 0, speculative=True)),
            ("expert", lambda: s.prefetch_hint(0, BIG + 1, 0.5)),
            ("p", lambda: s.prefetch_hint(0, 1, 1.0000000001)),  # 1.0 as a C float
            ("layer", lambda: s.cancel(BIG + 1, 0)),
            ("layout", lambda: s.layout(BIG)),
            ("layout", lambda: s.component(BIG, "gate")),
            ("name", lambda: s.component(0, "gate\0junk")),
            ("key", lambda: s.meta("arch\0junk")),
            ("timeout", lambda: s.claim(0, 1, timeout=float("nan"))),
            ("timeout", lambda: s.claim(0, 1, timeout=-1)),
            ("timeout", lambda: s.claim(0, 1, timeout="5")),
            ("timeout", lambda: s.warmup_wait(timeout=float("nan"))),
        ]
        for name, call in cases:
            _raises_naming(name, call)
        msg = _raises_naming("layer", lambda: s.claim(BIG + 1, 3))
        assert "4294967297" in msg and "uint32_t" in msg, msg
        st = s.stats()
        assert st["claims"] == 0 and st["prefetch_demand"] == 0, st  # nothing reached C

    for name, opts in (("workers", dict(workers=BIG + 2)), ("slot_bytes", dict(slot_bytes=2 ** 64)),
                       ("ring_slots", dict(ring_slots=-1)),
                       ("flags", dict(flags=BIG | smoe_stream.OPEN_ALLOW_BUFFERED)),
                       ("top_k", dict(top_k="8")), ("freq_path", dict(freq_path="a\0b")),
                       ("path", dict(path=p + "\0junk"))):
        path = opts.pop("path", p)
        _raises_naming(name, lambda: open_stream(path, **opts))

    w = smoe_stream.Writer(str(tmp / "w.smoe"), 1, 1)
    for name, call in (("layer", lambda: w.add_blob(BIG, 0, 0, b"x")),
                       ("expert", lambda: w.add_blob(0, BIG, 0, b"x")),
                       ("layout", lambda: w.add_blob(0, 0, -1, b"x")),
                       ("shape", lambda: w.add_layout([("g", 7, (2 ** 64, 1), 0, 16)])),
                       ("offset", lambda: w.add_layout([("g", 7, (8,), -16, 16)])),
                       ("shape", lambda: w.add_layout([("g", 7, (1, 1, 1, 1, 8), 0, 16)])),
                       ("name", lambda: w.add_layout([("g" * 64, 7, (8,), 0, 16)])),
                       ("dtype", lambda: w.add_layout([("g", BIG + 7, (8,), 0, 16)]))):
        _raises_naming(name, call)
    w.abort()
    _raises_naming("layers", lambda: smoe_stream.Writer(str(tmp / "x.smoe"), BIG + 1, 4))
    _raises_naming("experts", lambda: smoe_stream.Writer(str(tmp / "x.smoe"), 1, -4))


def test_huge_timeout_waits_without_limit(tmp):
    """timeout=1e30 (1e39 ns, 0 modulo 2**64) and infinity wait as long as it
    takes: with the read held, the claim is still waiting half a second
    later, and returns the blob once the read goes on."""
    p = str(tmp / "v.smoe")
    write_vault(p, 2, 3)
    out = run_with_faults("""
import threading
s = open_stream(vault)
for expert, timeout in ((1, 1e30), (2, float("inf")), (0, 2 ** 70)):
    F.pyfault_hold(1)                 # reads wait until released
    got = []
    def waiter():
        try:
            with s.claim(0, expert, timeout=timeout) as b:
                got.append(b.expert)
        except Exception as e:
            got.append(e)
    t = threading.Thread(target=waiter)
    t.start()
    t.join(0.5)
    waiting = t.is_alive() and not got
    F.pyfault_hold(0)
    t.join(30)
    assert waiting, ("did not wait", timeout, got)
    assert got == [expert], (timeout, got)
    print("waited:", timeout)
s.close()
""", p)
    assert out.count("waited:") == 3, out
