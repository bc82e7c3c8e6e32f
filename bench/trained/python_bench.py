#!/usr/bin/env python3
"""python_bench.py MODEL_DIR VAULT [--slots 10%,25%,50%] [--prompt N] [--decode N]:
stream_experts with the lookahead off and on, greedy decoding of held-out
text on the CPU (the plain Qwen3-MoE forward of python/tests/qwen3_moe.py,
float32, with a KV cache), one JSON line per ring size and setting: the
library's hit rate (demand prefetches that found the expert resident, as
smoe-llama's hit_rate; join_rate: found it in flight), claim wait per token,
bytes read, decoded tokens per second, and the lookahead's recall.
VAULT: a vault packed from MODEL_DIR's model.safetensors."""
import argparse
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "..", "python"),
                os.path.join(here, "..", "..", "python", "tests")]

import torch  # noqa: E402

import smoe_stream  # noqa: E402
from smoe_stream.hf import stream_experts  # noqa: E402
from qwen3_moe import held_out_text, load_fixture  # noqa: E402


def one(model_dir, vault, slots, lookahead, n_prompt, n_decode):
    torch.manual_seed(0)
    model = load_fixture(model_dir)
    L = len(model.model.layers)
    h = stream_experts(model, vault, lookahead=lookahead, workers=2, ring_slots=slots,
                       flags=smoe_stream.OPEN_NO_PREWARM | smoe_stream.OPEN_NO_FREQ)
    try:
        caches = [[] for _ in range(L)]
        ids = torch.tensor(list(held_out_text(n_prompt)))[None]
        with torch.no_grad():
            logits = model(ids, caches)
            s0 = h.stats()
            t0 = time.perf_counter()
            out = []
            for _ in range(n_decode):
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                out.append(int(nxt))
                logits = model(nxt, caches)
            dt = time.perf_counter() - t0
        s1 = h.stats()
        d = {k: s1[k] - s0[k] for k in ("hits", "joins", "misses", "claim_wait_ns",
                                         "bytes_read", "prefetch_hint")}
        asked = max(1, d["hits"] + d["joins"] + d["misses"])
        rec = dict(model=os.path.basename(os.path.normpath(model_dir)), slots=slots,
                   lookahead=lookahead, decode_tokens=n_decode,
                   hit_rate=round(d["hits"] / asked, 4), join_rate=round(d["joins"] / asked, 4),
                   wait_ms_per_token=round(d["claim_wait_ns"] / 1e6 / n_decode, 4),
                   bytes_read_per_token=d["bytes_read"] // n_decode,
                   tokens_per_s=round(n_decode / dt, 2), hints=d["prefetch_hint"])
        if lookahead:
            rec["lookahead_recall"] = round(s1["lookahead_recall"], 4)
        return rec, out
    finally:
        h.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("vault")
    ap.add_argument("--slots", default="10%,25%,50%")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", type=int, default=128)
    a = ap.parse_args()
    with smoe_stream.Stream(a.vault, flags=smoe_stream.OPEN_NO_PREWARM) as s:
        entries = s.layers * s.experts
    for spec in a.slots.split(","):
        slots = max(1, round(entries * float(spec[:-1]) / 100)) if spec.endswith("%") else int(spec)
        ref = None
        for look in (False, True):
            rec, out = one(a.model_dir, a.vault, slots, look, a.prompt, a.decode)
            rec["ring"] = spec
            if ref is None:
                ref = out
            rec["same_tokens"] = out == ref
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
