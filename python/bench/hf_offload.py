"""Decode speed of a model whose experts do not fit the memory given:
stream_experts against accelerate's disk offload, side by side, at equal
host and GPU memory (docs/python.md, "Against accelerate's disk offload").

    python3 hf_offload.py WORKDIR OUTDIR [--layers N] [--host-gib G] [--tokens N]
                          [--routing model|uniform|trace:FILE] [--routing-seed S]
    python3 hf_offload.py --check-routing [N] [--layers N] [--routing ...]

1. A random-weight model shaped like Qwen3-30B-A3B (hidden 2048, 128 experts
   of 768, top-8, 32 query and 4 key-value heads, vocabulary 151,936), with
   --layers layers (48 in the real model; fewer to fit the disk), is written
   with save_pretrained and packed with `smoe pack`.
2. Each side then runs in a process of its own, in a memory cgroup of
   --host-gib GiB (page cache included), after the page cache is dropped:
   - stream: smoe_stream.hf.from_pretrained (dense weights on the GPU,
     experts streamed through a ring of --ring-gib GiB);
   - accelerate: from_pretrained(device_map="auto", max_memory={0: the
     stream side's measured peak GPU memory, "cpu": --ring-gib GiB},
     offload_folder=...): what does not fit goes to disk.
   Each prefills the same 16-token prompt, then decodes one token per step
   with the KV cache, fed a seeded random token stream (decode() says why);
   decode tokens/s is tokens over the decode time.
3. --routing (measurement only; routing.py): `model` (the default) lets the
   random model's routers choose, which repeats far more than a trained
   model's; `uniform` replaces each token's top-8 per layer with 8 experts
   drawn uniformly at random (seeded by --routing-seed), the worst case for
   any cache; `trace:FILE` replays a routing trace (docs/trace-format.md,
   gzip allowed) mapped onto the model's shape, as the output says. The
   same hook replaces the router's indices on both sides; each side records
   a digest of what it replaced after every forward, compared in the result
   (same_routing). --check-routing [N] prints the first N tokens' experts
   and exits, without a model or transformers.
Writes OUTDIR/hf_offload.json (with the routing, and the stream side's ring
hit rate and bytes read) and prints a table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import routing as routing_mod  # noqa: E402 (beside this script)

GIB = 1 << 30
EXPERTS, TOP_K, PROMPT = 128, 8, 16


def qwen3_config(layers):
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                          moe_intermediate_size=768, num_experts=EXPERTS,
                          num_experts_per_tok=TOP_K,
                          num_hidden_layers=layers, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, max_position_embeddings=4096,
                          decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
                          tie_word_embeddings=False, rope_theta=1e6, initializer_range=0.02)


def make(work, layers, log):
    import torch
    from transformers import AutoModelForCausalLM
    ckpt = os.path.join(work, "ckpt")
    vault = os.path.join(work, "model.smoe")
    if os.path.exists(os.path.join(ckpt, "config.json")) and os.path.exists(vault):
        return ckpt, vault
    t = time.time()
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(qwen3_config(layers), dtype=torch.bfloat16)
    m.save_pretrained(ckpt, max_shard_size="4GB")
    n = sum(p.numel() for p in m.parameters())
    del m
    torch.cuda.empty_cache()
    log("model: %d layers, %.2f B parameters, written in %.0f s" % (layers, n / 1e9,
                                                                  time.time() - t))
    t = time.time()
    p = subprocess.run([os.environ["SMOE_TOOL"], "pack", "--quiet", "--out", vault, ckpt],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("smoe pack: " + p.stderr)
    log("packed in %.0f s: %s" % (time.time() - t, p.stdout.strip().splitlines()[0]))
    return ckpt, vault


def cgroup(name, limit):
    """A memory cgroup (v2) of `limit` bytes, swap off; its path, or None."""
    root = "/sys/fs/cgroup"
    try:
        if "memory" not in open(os.path.join(root, "cgroup.controllers")).read():
            return None
        with open(os.path.join(root, "cgroup.subtree_control"), "w") as f:
            f.write("+memory")
        path = os.path.join(root, name)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "memory.max"), "w") as f:
            f.write(str(limit))
        try:
            with open(os.path.join(path, "memory.swap.max"), "w") as f:
                f.write("0")
        except OSError:
            pass
        return path
    except OSError:
        return None


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def run_side(side, args, ckpt, vault, extra, log):
    cg = cgroup("smoe-bench-" + side, int(args.host_gib * GIB))
    dropped = drop_caches()
    out = os.path.join(args.work, side + ".json")
    cmd = [sys.executable, os.path.abspath(__file__), "--side", side, "--ckpt", ckpt,
           "--vault", vault, "--result", out, "--tokens", str(args.tokens),
           "--decode-seconds", str(args.decode_seconds), "--ring-gib", str(args.ring_gib),
           "--offload", os.path.join(args.work, "offload"), "--routing", args.routing,
           "--routing-seed", str(args.routing_seed)] + extra

    def enter():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    t = time.time()
    p = subprocess.run(cmd, preexec_fn=enter, capture_output=True, text=True,
                       timeout=args.side_timeout)
    with open(os.path.join(args.out, side + ".log"), "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode:
        log("%s side failed (exit %d):\n%s" % (side, p.returncode, (p.stdout + p.stderr)[-3000:]))
        return None
    r = json.load(open(out))
    r.update(cgroup=cg, cgroup_limit_gib=args.host_gib if cg else None, caches_dropped=dropped,
             wall_s=round(time.time() - t, 1))
    if cg:
        try:
            r["cgroup_peak_gib"] = int(open(os.path.join(cg, "memory.peak")).read()) / GIB
        except OSError:
            pass
    return r


def decode(model, steps, budget_s, torch, override=None):
    """Prefill a 16-token prompt, then one token per step with the KV cache.
    The token fed at each step is drawn at random (seeded; the same for both
    sides), not the model's own: a random-weight model's greedy output
    repeats a few tokens, whose experts would then stay in any cache and
    make expert loading look cheaper than on real text. The argmax at each
    step is recorded to compare the two sides, and with a routing override
    the digest of the routing applied so far after each forward."""
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(100, 150000, (1, PROMPT), generator=g).cuda()
    feed = torch.randint(100, 150000, (steps + 1,), generator=g).tolist()
    digests = []
    torch.cuda.synchronize()
    t0 = time.time()
    with torch.no_grad():
        out = model(prompt, use_cache=True)
        past = out.past_key_values
        toks = [int(out.logits[0, -1].argmax())]
        if override:
            digests.append(override.digest())
        torch.cuda.synchronize()
        t1 = time.time()
        while len(toks) < steps and time.time() - t1 < budget_s:
            tok = torch.tensor([[feed[len(toks)]]], device="cuda")
            out = model(tok, past_key_values=past, use_cache=True)
            past = out.past_key_values
            toks.append(int(out.logits[0, -1].argmax()))
            if override:
                digests.append(override.digest())
        torch.cuda.synchronize()
        t2 = time.time()
    n = len(toks) - 1
    return {"prefill_s": round(t1 - t0, 3), "decode_tokens": n, "decode_s": round(t2 - t1, 3),
            "tok_per_s": n / (t2 - t1) if n else 0.0, "tokens": toks,
            "routing_digests": digests}


def side_routing(a, model):
    """The --routing override on this side's model (None for `model`),
    shaped from the model's own config."""
    cfg = model.config
    r = routing_mod.parse_mode(a.routing, cfg.num_hidden_layers, cfg.num_experts,
                               cfg.num_experts_per_tok, a.routing_seed, PROMPT + a.tokens)
    if r is None:
        return None, None
    print("routing: " + r.describe(), flush=True)
    return routing_mod.Override(model, r), r


def side_main(a):
    import torch
    res = {"side": a.side}
    t = time.time()
    if a.side == "stream":
        sys.path.insert(0, os.path.join(HERE, ".."))
        import smoe_stream
        from smoe_stream.hf import from_pretrained
        from transformers import AutoConfig
        cfg = AutoConfig.from_pretrained(a.ckpt)
        blob = 3 * cfg.hidden_size * cfg.moe_intermediate_size * 2
        slot = (blob + 16383) // 16384 * 16384
        slots = int(a.ring_gib * GIB // slot)
        model, h = from_pretrained(a.ckpt, a.vault, device="cuda", dtype=torch.bfloat16,
                                   ring_slots=slots, workers=16, top_k=cfg.num_experts_per_tok,
                                   flags=smoe_stream.OPEN_NO_PREWARM | smoe_stream.OPEN_NO_FREQ)
        res["ring_slots"] = slots
    else:
        from transformers import AutoModelForCausalLM
        shutil.rmtree(a.offload, ignore_errors=True)
        model = AutoModelForCausalLM.from_pretrained(
            a.ckpt, dtype=torch.bfloat16, device_map="auto", offload_folder=a.offload,
            max_memory={0: int(a.gpu_gib * GIB), "cpu": int(a.ring_gib * GIB)})
        where = {}
        for mod, dev in model.hf_device_map.items():
            where[str(dev)] = where.get(str(dev), 0) + 1
        res["device_map"] = where
        res["device_map_layers"] = {str(d): [m for m, v in model.hf_device_map.items()
                                             if v == d and ".layers." in "." + m + "."][:64]
                                    for d in set(model.hf_device_map.values())}
        model.eval()
    res["load_s"] = round(time.time() - t, 1)
    override, r = side_routing(a, model)
    res["routing"] = r.describe() if r else "model"
    torch.cuda.synchronize()
    res["gpu_weights_gib"] = torch.cuda.memory_allocated() / GIB
    torch.cuda.reset_peak_memory_stats()
    res.update(decode(model, a.tokens, a.decode_seconds, torch, override))
    res["gpu_peak_gib"] = torch.cuda.max_memory_allocated() / GIB
    res["gpu_reserved_gib"] = torch.cuda.memory_reserved() / GIB
    try:
        res["rss_gib"] = int(open("/proc/self/statm").read().split()[1]) * os.sysconf(
            "SC_PAGE_SIZE") / GIB
    except OSError:
        pass
    if a.side == "stream":
        st = h.stats()
        res["stats"] = {k: st[k] for k in ("claims", "claim_hits", "misses", "hits", "joins",
                                           "bytes_read", "claim_wait_ns", "io_mode", "slots",
                                           "evictions", "reads_failed")}
        h.close()
    with open(a.result, "w") as f:
        json.dump(res, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--layers", type=int, default=0, help="0: as many as the disk allows, <= 12")
    ap.add_argument("--host-gib", type=float, default=16.0)
    ap.add_argument("--ring-gib", type=float, default=6.0)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--decode-seconds", type=float, default=60.0)
    ap.add_argument("--side-timeout", type=float, default=400.0)
    ap.add_argument("--side")
    ap.add_argument("--ckpt")
    ap.add_argument("--vault")
    ap.add_argument("--result")
    ap.add_argument("--offload")
    ap.add_argument("--gpu-gib", type=float, default=0)
    ap.add_argument("--routing", default="model", help="model | uniform | trace:FILE")
    ap.add_argument("--routing-seed", type=int, default=1)
    ap.add_argument("--check-routing", type=int, nargs="?", const=4, metavar="N",
                    help="print the first N (4) tokens' routed experts and exit")
    a = ap.parse_args()
    if a.side:
        return side_main(a)
    if a.check_routing is not None:
        return check_routing(a)
    if not a.work or not a.out:
        ap.error("WORKDIR and OUTDIR are needed (except with --check-routing)")
    if a.routing.startswith("trace:"):  # the sides may not share this directory
        a.routing = "trace:" + os.path.abspath(a.routing[6:])
    try:  # a bad --routing fails here, before a model is made
        rt = routing_mod.parse_mode(a.routing, a.layers or 1, EXPERTS, TOP_K,
                                    a.routing_seed, PROMPT + a.tokens)
    except routing_mod.RoutingError as e:
        ap.error(str(e))
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)
    if not a.layers:
        free = shutil.disk_usage(a.work).free
        per_layer = 3 * 1.25 * GIB  # checkpoint, vault, offload folder
        a.layers = max(2, min(12, int((free - 10 * GIB) // per_layer)))
        log("disk: %.1f GiB free: %d layers" % (free / GIB, a.layers))
    rt = routing_mod.parse_mode(a.routing, a.layers, EXPERTS, TOP_K, a.routing_seed,
                                PROMPT + a.tokens)
    log("routing: " + (rt.describe() if rt else "the model's own routers"))
    ckpt, vault = make(a.work, a.layers, log)
    res = {"layers": a.layers, "host_gib": a.host_gib, "ring_gib": a.ring_gib,
           "command": " ".join(sys.argv),
           "routing": {"mode": a.routing.split(":", 1)[0], "arg": a.routing,
                       "seed": a.routing_seed if a.routing == "uniform" else None,
                       "description": rt.describe() if rt else "the model's own routers"}}
    s = run_side("stream", a, ckpt, vault, [], log)
    res["stream"] = s
    if s:
        st = s["stats"]
        res["ring_hit_rate"] = st["claim_hits"] / st["claims"] if st["claims"] else None
        res["bytes_read"] = st["bytes_read"]
    gpu = max(2.0, round((s["gpu_peak_gib"] if s else 4.0) + 0.05, 2))
    res["gpu_budget_gib"] = gpu
    acc = run_side("accelerate", a, ckpt, vault, ["--gpu-gib", str(gpu)], log)
    res["accelerate"] = acc
    if s and acc:
        res["speedup"] = s["tok_per_s"] / acc["tok_per_s"] if acc["tok_per_s"] else None
        k = min(len(s["tokens"]), len(acc["tokens"]))
        res["same_argmax"] = s["tokens"][:k] == acc["tokens"][:k]
        d = min(len(s["routing_digests"]), len(acc["routing_digests"]))
        res["same_routing"] = (s["routing_digests"][:d] == acc["routing_digests"][:d]
                               if rt else None)
    with open(os.path.join(a.out, "hf_offload.json"), "w") as f:
        json.dump(res, f, indent=1)
    for side in ("stream", "accelerate"):
        r = res.get(side)
        if r:
            log("%-10s load %6.1f s  prefill %6.2f s  decode %3d tokens in %7.2f s: %7.3f tok/s"
                "  GPU peak %.2f GiB  cgroup peak %s GiB" % (
                    side, r["load_s"], r["prefill_s"], r["decode_tokens"], r["decode_s"],
                    r["tok_per_s"], r["gpu_peak_gib"], "%.2f" % r["cgroup_peak_gib"]
                    if "cgroup_peak_gib" in r else "?"))
    if s:
        log("stream ring: %d claims, hit rate %.3f, %d evictions, %.2f GiB read" % (
            s["stats"]["claims"], res["ring_hit_rate"] or 0, s["stats"]["evictions"],
            res["bytes_read"] / GIB))
    if res.get("speedup"):
        log("stream_experts / accelerate disk offload: %.1fx decode tokens/s; same argmax "
            "at each step: %s; routing %s, the same on both sides: %s" % (
                res["speedup"], res["same_argmax"], res["routing"]["mode"],
                res["same_routing"]))
    return 0


def check_routing(a):
    """--check-routing: the first tokens' experts per layer, no model."""
    layers = a.layers or 10
    try:
        rt = routing_mod.parse_mode(a.routing, layers, EXPERTS, TOP_K, a.routing_seed,
                                    PROMPT + a.tokens)
    except routing_mod.RoutingError as e:
        print("hf_offload.py: " + str(e), file=sys.stderr)
        return 2
    print("model: %d layers x %d experts, top-%d (--layers; the benchmark's shape)"
          % (layers, EXPERTS, TOP_K))
    if rt is None:
        print("routing: model: the random model's own routers choose; nothing to show "
              "without the model")
        return 0
    print("routing: " + rt.describe())
    for t in range(a.check_routing):
        for L in range(layers):
            print("token %d layer %d: %s" % (t, L, " ".join(map(str, rt.experts(t, L)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
