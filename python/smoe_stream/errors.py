"""The SmoeError hierarchy: one Python exception per negative SMOE_E* code.

Every instance carries .code (the negative value), .name ("SMOE_ETRUNC") and
the library's detailed message (smoe_last_error(): which file, which field,
what was expected). Classes group the codes by what a caller does about
them; several also derive from the matching built-in exception, so
`except TimeoutError` or `except ValueError` work as expected.
"""
from . import _lib


class SmoeError(Exception):
    """A libsmoe_stream call failed."""

    def __init__(self, code, message=None):
        self.code = int(code)
        self.name = error_name(code)
        self.message = message or error_text(code)
        super().__init__("%s: %s" % (self.name, self.message))


class InvalidArgument(SmoeError, ValueError):
    """SMOE_EINVAL: a bad argument, or a blob used after its release."""


class OutOfMemory(SmoeError, MemoryError):
    """SMOE_ENOMEM."""


class NotFound(SmoeError, LookupError):
    """SMOE_ENOENT: no such (layer, expert), layout or component."""


class ReadError(SmoeError):
    """An expert's read failed (SMOE_EIO, SMOE_ECHECKSUM, SMOE_ETRUNC at claim);
    it stays failed until the next prefetch of that expert retries it."""


class VaultError(SmoeError):
    """The vault is malformed: bad magic, version, field, checksum, range; or
    an index vault's source file is missing or changed (SMOE_ESOURCE)."""


class ChecksumError(VaultError, ReadError):
    """SMOE_ECHECKSUM: a blob's data does not match its recorded hash."""


class TruncatedError(VaultError, ReadError):
    """SMOE_ETRUNC: the file ends before a table or blob does."""


class WouldBlock(SmoeError):
    """SMOE_EAGAIN (still loading) or SMOE_ENOTRESIDENT (nobody asked for it):
    a claim without waiting found nothing to take."""


class Timeout(SmoeError, TimeoutError):
    """SMOE_ETIMEDOUT: claim(timeout=...) ran out."""


class Shutdown(SmoeError):
    """SMOE_ESHUTDOWN: the stream is shut down."""


class Busy(SmoeError):
    """SMOE_EBUSY or SMOE_EREFS: references are still held."""


class RingTooSmall(SmoeError):
    """SMOE_EFULL, SMOE_ESMALLRING, SMOE_ESLOTSIZE: the ring has no room."""


class NotSupported(SmoeError):
    """SMOE_ENOTSUP."""


class SystemCallError(SmoeError, OSError):
    """SMOE_ESYS or SMOE_EDIRECTIO: the operating system refused."""


_CLASS = {
    "SMOE_EINVAL": InvalidArgument, "SMOE_ENOMEM": OutOfMemory, "SMOE_EIO": ReadError,
    "SMOE_ENOENT": NotFound, "SMOE_EFULL": RingTooSmall, "SMOE_EAGAIN": WouldBlock,
    "SMOE_ENOTRESIDENT": WouldBlock, "SMOE_ETIMEDOUT": Timeout, "SMOE_ESHUTDOWN": Shutdown,
    "SMOE_EBUSY": Busy, "SMOE_ECHECKSUM": ChecksumError, "SMOE_ETRUNC": TruncatedError,
    "SMOE_ESYS": SystemCallError, "SMOE_EMAGIC": VaultError, "SMOE_EVERSION": VaultError,
    "SMOE_ERANGE": VaultError, "SMOE_EOVERFLOW": VaultError, "SMOE_EALIGN": VaultError,
    "SMOE_EOVERLAP": VaultError, "SMOE_EDUP": VaultError, "SMOE_ECOUNT": VaultError,
    "SMOE_EHDRSUM": VaultError, "SMOE_EFORMAT": VaultError, "SMOE_EDIRECTIO": SystemCallError,
    "SMOE_ENOTSUP": NotSupported, "SMOE_ESMALLRING": RingTooSmall,
    "SMOE_ESLOTSIZE": RingTooSmall, "SMOE_EREFS": Busy, "SMOE_ESOURCE": VaultError,
}


def error_name(code):
    """"SMOE_ETRUNC" for -12; the library names codes of releases newer than
    this binding too."""
    n = _lib.err_name(int(code))
    return n.decode() if n else "SMOE_E?"


def error_text(code):
    return _lib.strerror(int(code)).decode()


def error_class(code):
    return _CLASS.get(error_name(code), SmoeError)


def raise_for(rc, what=None):
    """Raise the exception for a negative return code, with the calling
    thread's detailed message; return rc otherwise."""
    if rc >= 0:
        return rc
    msg = _lib.last_error().decode(errors="replace")
    if not msg:
        msg = error_text(rc)
    if what:
        msg = "%s: %s" % (what, msg)
    raise error_class(rc)(rc, msg)


# The codes by name, from the library (SMOE_EINVAL == -1, ...).
codes = {}
for _c in range(-1, -128, -1):
    _n = _lib.err_name(_c)
    if not _n or not _n.startswith(b"SMOE_E"):
        break
    codes[_n.decode()] = _c
del _c, _n
