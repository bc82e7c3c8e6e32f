#!/usr/bin/env python3
"""corrupt.py GGUF VAULT OUT TENSOR EXPERT: copy VAULT to OUT with one byte of
expert EXPERT of GGUF tensor TENSOR flipped inside its blob (found by its
bytes, so no knowledge of the vault's tables is needed)."""
import sys

import gguf


def main():
    src, vault, out, name, expert = sys.argv[1:6]
    r = gguf.GGUFReader(src)
    t = next(t for t in r.tensors if t.name == name)
    raw = bytes(t.data.tobytes())
    n = len(raw) // int(t.shape[-1])
    piece = raw[int(expert) * n:(int(expert) + 1) * n]
    data = bytearray(open(vault, "rb").read())
    at = data.find(piece[:256])
    if at < 0 or data.find(piece[:256], at + 1) >= 0:
        sys.exit(f"corrupt.py: expert {expert} of {name} not found exactly once in {vault}")
    data[at + 100] ^= 0x5A
    open(out, "wb").write(data)


if __name__ == "__main__":
    main()
