"""Checks on what crosses into C. ctypes converts a Python int to uint32_t
or uint64_t modulo 2**32 or 2**64 and a string with a NUL to the bytes
before it, silently; here a value the C type cannot hold raises
InvalidArgument naming the argument, before anything is called."""
import ctypes
import math
import numbers
import operator
import os

from .errors import InvalidArgument, codes

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
# A timeout of UINT64_MAX ns is the library's "no limit".
FOREVER = U64_MAX


def bad(what, msg):
    """what: the call, or a function that words it (only on this path)."""
    return InvalidArgument(codes["SMOE_EINVAL"], "%s: %s" % (what() if callable(what) else what,
                                                             msg))


def integer(v, name, what, lo=0, hi=U32_MAX, ctype="uint32_t"):
    """v as an int in [lo, hi] (the range of C type `ctype`)."""
    if type(v) is int and lo <= v <= hi:  # the common case, kept cheap
        return v
    try:
        i = operator.index(v)
    except TypeError:
        raise bad(what, "%s must be an integer, not %s" % (name, type(v).__name__)) from None
    if not lo <= i <= hi:
        raise bad(what, "%s %d is out of range (%s: %d to %d)" % (name, i, ctype, lo, hi))
    return i


def u32(v, name, what):
    return integer(v, name, what)


def u64(v, name, what):
    return integer(v, name, what, 0, U64_MAX, "uint64_t")


def ctype_range(t):
    """(lo, hi, name) of a ctypes integer type."""
    bits = 8 * ctypes.sizeof(t)
    if t(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1, "int%d_t" % bits
    return 0, (1 << bits) - 1, "uint%d_t" % bits


def timeout_ns(t, what, name="timeout"):
    """Seconds as the library's nanoseconds. None, infinity and anything
    from UINT64_MAX ns (584 years) up mean no limit; NaN, a negative number
    or a non-number raise."""
    if t is None:
        return FOREVER
    if not isinstance(t, numbers.Real):
        raise bad(what, "%s must be a number of seconds or None, not %s"
                  % (name, type(t).__name__))
    ns = t * 1000000000 if isinstance(t, numbers.Integral) else float(t) * 1e9
    if ns != ns:
        raise bad(what, "%s is NaN" % name)
    if ns < 0:
        raise bad(what, "%s %r is negative" % (name, t))
    if ns >= FOREVER:
        return FOREVER
    return int(ns)


def probability(p, name, what):
    """p as a float in [0, 1] (checked on the double, before the C float
    rounds 1.0000000001 to 1)."""
    if not isinstance(p, numbers.Real):
        raise bad(what, "%s must be a number, not %s" % (name, type(p).__name__))
    f = float(p)
    if math.isnan(f) or not 0.0 <= f <= 1.0:
        raise bad(what, "%s %r is outside [0, 1]" % (name, p))
    return f


def cstr(v, name, what, path=False):
    """v (str, bytes; a path also os.PathLike) as bytes for a char *; a NUL
    inside would cut it short in C."""
    if path:
        try:
            b = os.fsencode(v)
        except TypeError:
            raise bad(what, "%s must be a path, not %s" % (name, type(v).__name__)) from None
    elif isinstance(v, str):
        b = v.encode()
    elif isinstance(v, bytes):
        b = v
    else:
        raise bad(what, "%s must be a string, not %s" % (name, type(v).__name__))
    if b"\0" in b:
        raise bad(what, "%s %r contains a NUL byte" % (name, v))
    return b
