#!/usr/bin/env python3
"""plugin_stats.py STATS.json MODE PROMPT TOKENS DECODE_TPS TOPK MOE_LAYERS
[--belady SMOE TRACE SLOTS BLOB_BYTES DISK_GBPS]: what run.sh prints below
a plugin row, from libggml-smoe's SMOE_STATS:
  - the counters;
  - a hit's own cost: hit_ns / hit_claims (its demand prefetch, claim and
    release, no read), times the experts a decoded token claims (top-k x
    MoE layers: every one a hit, the worst case for this figure), as a
    share of a decoded token's time (1 / decode t/s);
  - with --belady TRACE (decode only): TRACE is the routing the run
    demand-prefetched, recorded by the library (SMOE_TRACE: one line per
    token and layer, the replayed trace's when SMOE_REPLAY is set); the
    load's check of each expert tensor's first and last expert, recorded
    first, is dropped. `smoe sim` on it at the run's ring gives Belady's
    optimum; its misses x BLOB_BYTES / the disk's rate is the disk time
    the optimum still needs, beside the plugin's own wait for reads
    (miss_wait_ns)."""
import json
import re
import subprocess
import sys
import tempfile


def routing_only(src, dst):
    """Copy trace src to dst without its leading tokens whose every record
    names only experts 0 and E-1 (the load's check). Returns the tokens kept."""
    head, toks = [], []
    experts = None
    for line in open(src):
        if line.startswith("#"):
            head.append(line)
            m = re.search(r"experts=(\d+)", line)
            if m:
                experts = int(m.group(1))
            continue
        f = line.split()
        if not f:
            continue
        if not toks or toks[-1][0] != f[0]:
            toks.append((f[0], []))
        toks[-1][1].append(line)
    check = {"0", str(experts - 1)}
    while toks and all(set(r.split()[2:]) <= check for r in toks[0][1]):
        toks.pop(0)
    with open(dst, "w") as f:
        f.writelines(head)
        for _, recs in toks:
            f.writelines(recs)
    return len(toks)


def main():
    a = sys.argv[1:]
    s = json.load(open(a[0]))
    mode, prompt, tokens, tps = a[1], int(a[2]), int(a[3]), float(a[4])
    topk, layers = int(a[5]), int(a[6])
    print("    hits %d joins %d misses %d claims %d bytes_read %d wait_ns %d copy_ns %d graphs %d"
          " hit_claims %d hit_ns %d miss_wait_ns %d replay_tokens %d" % (
              s["hits"], s["joins"], s["misses"], s["claims"], s["bytes_read"], s["wait_ns"],
              s["copy_ns"], s["graphs"], s["hit_claims"], s["hit_ns"], s["miss_wait_ns"],
              s["replay_tokens"]))
    if s["hit_claims"] and tps > 0:
        per = s["hit_ns"] / s["hit_claims"]
        tok_ns = 1e9 / tps
        k = topk * layers
        print("    hit cost: %.2f us a hit (prefetch + claim + release, hit_ns / hit_claims);"
              " x %d experts a decoded token = %.1f us, %.3f%% of a decoded token (%.1f ms)"
              % (per / 1e3, k, per * k / 1e3, per * k / tok_ns * 100, tok_ns / 1e6))
    if len(a) > 7 and a[7] == "--belady":
        smoe, trace, slots, blob, gbps = a[8], a[9], int(a[10]), float(a[11]), float(a[12])
        with tempfile.NamedTemporaryFile(suffix=".trace", mode="w") as t, \
                tempfile.NamedTemporaryFile(suffix=".json") as f:
            n = routing_only(trace, t.name)
            subprocess.run([smoe, "sim", "--policy", "lru", "--size", str(slots), "--json",
                            f.name, t.name], check=True, stdout=subprocess.DEVNULL)
            row = json.load(open(f.name))["rows"][0]
        req = row["requests"]
        opt_miss = round(req * (1 - row["belady"]))
        opt_bytes = opt_miss * blob
        opt_s = opt_bytes / (gbps * 1e9)
        wait_s = s["miss_wait_ns"] / 1e9
        print("    belady: %d tokens, %d demands at %d slots: optimum hit rate %.3f (sim lru %.3f,"
              " the plugin %.3f); optimum reads %d blobs = %.1f MB, at the disk's %.3f GB/s"
              " %.3f s; the plugin read %.1f MB and waited %.3f s for reads: %.2fx the bound"
              % (n, req, slots, row["belady"], row["policies"]["lru"]["hit_rate"],
                 s["hit_rate"], opt_miss, opt_bytes / 1e6, gbps, opt_s,
                 s["bytes_read"] / 1e6, wait_s, wait_s / opt_s if opt_s else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
