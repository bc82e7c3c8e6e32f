#!/usr/bin/env python3
"""Summarise bench/bench_hint.sh's JSON files: per trace and memory, the
wait per token of each smoe+recall=R run as a share of smoe's (the goal:
0.75 at most 0.6 at 25%, 0.85 at 10%; 0.45 at most 1.05), with the hit
rate and the wasted speculative bytes beside it.

Usage: bench/bench_hint_table.py OUT/*.json
"""
import json
import os
import sys

GIB = 1024.0 ** 3


def row(path):
    d = json.load(open(path))
    modes = {m["mode"]: m for m in d["modes"] if m.get("ok")}
    s = modes.get("smoe")
    if not s:
        return None
    name = os.path.basename(path)[:-5]
    cells = ["%-22s %6.1f ms %5.3f" % (name, s["wait_us_per_token"]["mean"] / 1e3,
                                        s["hit_rate"])]
    for r in ("1", "0.75", "0.45"):
        m = modes.get("smoe+recall=" + r)
        if not m:
            cells.append("%28s" % "-")
            continue
        lib = m["library"]
        cells.append("%5.3f %5.3f %5.2f %4.2f" % (
            m["wait_us_per_token"]["mean"] / s["wait_us_per_token"]["mean"], m["hit_rate"],
            lib["wasted_bytes"] / GIB, lib["recall_measured"]))
    return "  ".join(cells)


print("%-22s %9s %5s  %-23s  %-23s  %-23s" % ("trace-memory", "smoe wait", "hit",
                                               "recall 1 (bound)", "recall 0.75",
                                               "recall 0.45"))
print("%-22s %9s %5s  %s" % ("", "per token", "rate",
                             "  ".join(["wait  hit   GiB   rec "] * 3)))
for p in sys.argv[1:]:
    r = row(p)
    if r:
        print(r)
