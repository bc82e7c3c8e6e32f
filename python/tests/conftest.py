"""Shared fixtures: vaults written through the binding's Writer, safetensors
checkpoints written by hand (no safetensors package needed), `smoe pack`."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import smoe_stream

BF16, F16, F32, I8, U8 = 7, 6, 10, 3, 2


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def blob_bytes(layer, expert, size):
    """Deterministic, distinct bytes for each (layer, expert)."""
    rng = np.random.default_rng(layer * 1000 + expert)
    return rng.integers(0, 256, size, dtype=np.uint8)


def write_vault(path, layers=3, experts=5, comps=None, meta=None):
    """A vault whose blob (l, e) holds blob_bytes(l, e, size). comps: the
    layout, (name, dtype, shape, offset, nbytes) tuples."""
    if comps is None:
        comps = [("gate", BF16, (8, 16), 0, 256), ("up", F16, (8, 16), 256, 256),
                 ("down", F32, (16, 8), 512, 512), ("scales", I8, (7,), 1024, 7)]
    size = max(c[3] + c[4] for c in comps)
    with smoe_stream.Writer(path, layers, experts) as w:
        lid = w.add_layout(comps)
        for k, v in (meta or {"arch": "test", "model": "tiny", "top_k": "2"}).items():
            w.set_meta(k, v)
        for l in range(layers):
            for e in range(experts):
                w.add_blob(l, e, lid, blob_bytes(l, e, size))
    return size


def open_stream(path, **kw):
    kw.setdefault("workers", 2)
    kw.setdefault("flags", smoe_stream.OPEN_ALLOW_BUFFERED | smoe_stream.OPEN_NO_PREWARM)
    return smoe_stream.Stream(path, **kw)


_ST = {"torch.bfloat16": "BF16", "torch.float16": "F16", "torch.float32": "F32",
       "torch.int8": "I8", "torch.uint8": "U8", "torch.int32": "I32", "torch.int64": "I64"}


def save_safetensors(path, tensors, metadata=None):
    """The safetensors format by hand: 8-byte little-endian header length,
    JSON header, then the data."""
    import torch
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": _ST[str(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def smoe_tool():
    tool = os.environ.get("SMOE_TOOL")
    if not tool:
        pytest.skip("SMOE_TOOL is not set (ctest sets it to the built smoe tool)")
    return tool


def pack(src, out):
    """smoe pack SOURCE --out OUT; returns its stdout."""
    r = subprocess.run([smoe_tool(), "pack", "--quiet", "--out", str(out), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, "smoe pack %s failed:\n%s%s" % (src, r.stdout, r.stderr)
    return r.stdout


def run_child(code, vault, library=None, timeout=120):
    """Run `code` in a Python process of its own (a crash or a hang there is
    a failed test here, not a dead test run), with `vault`, open_stream,
    blob_bytes and smoe_stream defined; library: the libsmoe_stream to load
    (default: this process's). Returns the CompletedProcess; a hang past
    `timeout` seconds is reported as returncode None."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(here, ".."), here]))
    if library:
        env["SMOE_STREAM_LIBRARY"] = library
    prelude = ("import gc, os, sys, threading, time\n"
               "import smoe_stream\n"
               "from conftest import open_stream, blob_bytes\n"
               "vault = %r\n" % vault)
    try:
        return subprocess.run([sys.executable, "-c", prelude + code], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) \
            else (e.stderr or "")
        return subprocess.CompletedProcess(e.cmd, None, out, err)


def child_ok(r):
    """Assert a run_child process ended cleanly; its output otherwise."""
    how = ("hung (killed after its timeout)" if r.returncode is None else
           "killed by signal %d" % -r.returncode if r.returncode < 0 else
           "exited %d" % r.returncode)
    assert r.returncode == 0, "child %s:\n%s%s" % (how, r.stdout, r.stderr)
    return r.stdout
