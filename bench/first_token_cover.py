#!/usr/bin/env python3
# first_token_cover.py - of each of a trace's first 10 tokens' experts, how
# many are among the 64 and the 256 experts used most often in its first
# 200 tokens (pre-warm's order: count, then key). The figure behind
# docs/benchmarks.md, "Pre-warm and the first token".
#
# Usage: python3 bench/first_token_cover.py TRACE.gz   (a 32-expert trace)
import collections, gzip, sys
# Of each of the first 10 tokens' experts, how many are among the N experts
# claimed most often in the first 200 tokens (pre-warm's order: count, then key)?
count, tok = collections.Counter(), collections.defaultdict(list)
for line in gzip.open(sys.argv[1], "rt"):
    if line.startswith("#") or not line.strip():
        continue
    f = line.split("|")[0].split()
    t, layer = int(f[0]), int(f[1])
    if t >= 200:
        break
    for e in f[2:]:
        count[(layer, int(e))] += 1
        tok[t].append((layer, int(e)))
rank = sorted(count, key=lambda k: (-count[k], k[0] * 32 + k[1]))
for n in (64, 256):
    hot = set(rank[:n])
    print(n, "hottest:", [sum(k in hot for k in tok[t]) for t in range(10)], "of 96")
