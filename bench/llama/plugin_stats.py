#!/usr/bin/env python3
"""plugin_stats.py STATS.json MODE PROMPT TOKENS DECODE_TPS TOPK MOE_LAYERS
[--belady SMOE TRACE SLOTS BLOB_BYTES DISK_GBPS]: what run.sh prints below
a plugin row, from libggml-smoe's SMOE_STATS:
  - the counters;
  - a hit's own cost: hit_ns / hit_claims (its demand prefetch, claim and
    release, no read), times the experts a decoded token claims (top-k x
    MoE layers: every one a hit, the worst case for this figure), as a
    share of a decoded token's time (1 / decode t/s);
  - with --belady (a replayed trace, decode only): `smoe sim` on the
    tokens the run replayed, at its ring, gives Belady's optimum; its
    misses x BLOB_BYTES / the disk's rate is the disk time the optimum
    still needs, beside the plugin's own wait for reads (miss_wait_ns)."""
import json
import subprocess
import sys
import tempfile


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
        n = s["replay_tokens"]
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([smoe, "sim", "--policy", "lru", "--size", str(slots), "--tokens",
                            "0:%d" % n, "--json", f.name, trace], check=True,
                           stdout=subprocess.DEVNULL)
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
