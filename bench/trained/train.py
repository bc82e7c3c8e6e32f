#!/usr/bin/env python3
"""train.py: train small byte-level Qwen3-MoE models (transformers'
Qwen3MoeForCausalLM, built from a config) on the Python sources of the
interpreter that runs it, stopping by time, and save them with
save_pretrained.

    python3 train.py --out DIR [--models fixture,large] [--seconds-fixture S]
                     [--seconds-large S] [--trace-tokens N]

One model per name in --models (shapes below). Token id = byte (vocab 256).
Training text: every *.py file under the interpreter's stdlib and
site-packages, except the packages named in HOLDOUT, whose files are the
held-out text the bits per byte are measured on. The router's load-balancing
loss is on (output_router_logits, router_aux_loss_coef).

Writes, for each model NAME: DIR/NAME/ (config.json, model.safetensors,
generation_config.json), DIR/NAME.trace.gz (the routing of held-out text in
docs/trace-format.md's format, one request per window), DIR/NAME.ref.pt (a
prompt and its float32 CPU logits, for checking other implementations), and
one JSON line per model on stdout with its figures.
"""
import argparse
import concurrent.futures as cf
import gzip
import json
import math
import os
import random
import sys
import sysconfig
import time

import numpy as np
import torch
import torch.nn.functional as F

# Packages whose sources are held out of training and measured on.
HOLDOUT = ("requests", "rich", "jinja2", "click", "pygments", "urllib3", "idna",
           "email", "xml", "asyncio")

SHAPES = {
    # the fixture tests use: small enough to commit in four forms (< 12 MB)
    "fixture": dict(layers=6, hidden=128, heads=4, kv_heads=2, head_dim=32, experts=16,
                    topk=4, width=32, seq=512, batch=64, lr=3e-3),
    # the larger model the defaults are measured on
    "large": dict(layers=10, hidden=256, heads=8, kv_heads=4, head_dim=32, experts=32,
                  topk=4, width=112, seq=512, batch=64, lr=2e-3),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def source_files():
    """(package, path) of every .py file under stdlib and site-packages."""
    roots = []
    for key in ("stdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p and os.path.isdir(p) and p not in roots:
            roots.append(p)
    seen, out = set(), []
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs.sort()
            rel = os.path.relpath(d, root)
            top = rel.split(os.sep)[0]
            if top in ("site-packages", "dist-packages") and root == roots[0]:
                dirs[:] = []  # site-packages is walked as its own root
                continue
            for f in sorted(files):
                if f.endswith(".py"):
                    p = os.path.join(d, f)
                    rp = os.path.realpath(p)
                    if rp not in seen:
                        seen.add(rp)
                        pkg = top if top != "." else os.path.splitext(f)[0]
                        out.append((pkg, p))
    return roots, out


def read_all(paths):
    def rd(p):
        try:
            with open(p, "rb") as fh:
                return fh.read()
        except OSError:
            return b""
    with cf.ThreadPoolExecutor(32) as ex:
        return list(ex.map(rd, paths))


def load_text(cap_bytes, seed):
    roots, files = source_files()
    rng = random.Random(seed)
    rng.shuffle(files)
    train = [p for k, p in files if k not in HOLDOUT]
    held = sorted(p for k, p in files if k in HOLDOUT)
    t0 = time.time()
    tr = bytearray()
    for i in range(0, len(train), 2000):
        for b in read_all(train[i:i + 2000]):
            tr += b + b"\n\n"
        if len(tr) >= cap_bytes:
            break
    ev = b"\n\n".join(read_all(held))
    log("text: %d files under %s; train %.1f MB, held-out %.1f MB (%d files of %s); read in %.1f s"
        % (len(files), ", ".join(roots), len(tr) / 1e6, len(ev) / 1e6, len(held),
           ",".join(sorted({k for k, _ in files if k in HOLDOUT})), time.time() - t0))
    return (np.frombuffer(bytes(tr[:cap_bytes]), dtype=np.uint8),
            np.frombuffer(ev, dtype=np.uint8))


def build(shape):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    s = shape
    cfg = Qwen3MoeConfig(
        vocab_size=256, hidden_size=s["hidden"], intermediate_size=4 * s["hidden"],
        moe_intermediate_size=s["width"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        head_dim=s["head_dim"], num_experts=s["experts"], num_experts_per_tok=s["topk"],
        decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
        max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=False, output_router_logits=False, router_aux_loss_coef=0.01,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    return cfg, Qwen3MoeForCausalLM(cfg)


def set_experts(model, impl):
    try:
        model.set_experts_implementation(impl)
        return True
    except Exception:  # older or newer API: set it on the config
        try:
            model.config._experts_implementation = impl
            return True
        except Exception:
            return False


def batch_of(data, n, seq, gen, dev):
    idx = torch.randint(0, len(data) - seq - 1, (n,), generator=gen)
    off = idx[:, None] + torch.arange(seq + 1)[None, :]
    return data[off.to(dev)].long()


@torch.no_grad()
def bits_per_byte(model, ev, seq, dev, max_bytes):
    model.eval()
    n = min(len(ev), max_bytes) // (seq + 1)
    x = ev[: n * (seq + 1)].view(n, seq + 1).long()
    tot, cnt = 0.0, 0
    for i in range(0, n, 32):
        b = x[i:i + 32].to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = model(input_ids=b[:, :-1], output_router_logits=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, 256), b[:, 1:].reshape(-1),
                               reduction="sum")
        tot += loss.item()
        cnt += b[:, 1:].numel()
    model.train()
    return tot / cnt / math.log(2)


def train(name, shape, data, ev, seconds, dev, out):
    cfg, model = build(shape)
    model.to(dev)
    seq, bs = shape["seq"], shape["batch"]
    gen = torch.Generator().manual_seed(1)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=shape["lr"], betas=(0.9, 0.95), fused=dev.type == "cuda")

    # The load-balancing loss, layer by layer: transformers' own sums it over
    # the layers' routing concatenated, which lets an expert die in one layer
    # while another layer uses it more (seen: 8 of 32 unused in a layer).
    router_in = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda mod, inp, out: router_in.append(inp[0]))
             for layer in model.model.layers]
    gates = [layer.mlp.gate.weight for layer in model.model.layers]
    E, k = cfg.num_experts, cfg.num_experts_per_tok

    def step(b):
        router_in.clear()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = model(input_ids=b[:, :-1], output_router_logits=False).logits
        ce = F.cross_entropy(logits.float().reshape(-1, 256), b[:, 1:].reshape(-1))
        aux = 0.0
        for x, w in zip(router_in, gates):
            p = F.softmax(F.linear(x.reshape(-1, x.shape[-1]).float(), w.float()), dim=-1)
            f = F.one_hot(p.topk(k, dim=-1).indices, E).float().sum(1).mean(0)  # sums to k
            aux = aux + E * (f * p.mean(0)).sum() / k  # 1.0 when balanced
        loss = ce + cfg.router_aux_loss_coef * aux
        loss.backward()
        router_in.clear()
        return ce.detach(), aux.detach() / len(gates)

    impl = "eager"
    if dev.type == "cuda":
        for cand in ("grouped_mm", "eager"):
            if not set_experts(model, cand):
                continue
            try:
                step(batch_of(data, 2, 64, gen, dev))
                opt.zero_grad(set_to_none=True)
                impl = cand
                break
            except Exception as e:
                log("%s: experts implementation %s failed: %s" % (name, cand, str(e)[:200]))
                opt.zero_grad(set_to_none=True)
    log("%s: %.2fM parameters, experts implementation %s"
        % (name, sum(p.numel() for p in model.parameters()) / 1e6, impl))
    t0 = time.time()
    it, warm = 0, 100
    while True:
        el = time.time() - t0
        if el >= seconds:
            break
        frac = el / seconds
        lr = shape["lr"] * min(1.0, (it + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ce, aux = step(batch_of(data, bs, seq, gen, dev))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if it % 200 == 0:
            log("%s: step %d %.0fs loss %.4f (%.3f bits/byte) balance %.4f (1: even) lr %.2e"
                % (name, it, el, ce.item(), ce.item() / math.log(2), aux.item(), lr))
        it += 1
    train_s = time.time() - t0
    for h in hooks:
        h.remove()
    bpb = bits_per_byte(model, ev, seq, dev, 2 << 20)
    log("%s: %d steps in %.0f s, held-out %.4f bits per byte" % (name, it, train_s, bpb))
    model = model.to(torch.bfloat16)
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    stats = dump_routing(name, model, cfg, ev, dev, out, shape)
    ref = dump_reference(model, ev, out, name)
    rec = dict(model=name, steps=it, train_seconds=round(train_s, 1), heldout_bits_per_byte=round(bpb, 4),
               params=sum(p.numel() for p in model.parameters()), experts_impl=impl, **stats, **ref)
    print(json.dumps(rec), flush=True)
    return model


@torch.no_grad()
def dump_routing(name, model, cfg, ev, dev, out, shape):
    """The routing of held-out text: windows of TRACE_TOKENS bytes, each a
    request; per token and layer the top-k experts by router logit (the
    order the router ranks them), then the next ranks after '|'. A causal
    model routes a position of a prompt as it would decoding it."""
    model.eval()
    E, k, L = cfg.num_experts, cfg.num_experts_per_tok, cfg.num_hidden_layers
    n_req, T = TRACE_REQUESTS, TRACE_TOKENS
    step = max(1, (len(ev) - T) // n_req)
    path = os.path.join(out, name + ".trace.gz")
    use = torch.zeros(L, E, dtype=torch.long)
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write("# source: bench/trained/train.py, %s model, held-out Python sources (%s)\n"
                % (name, ",".join(HOLDOUT)))
        f.write("# model=smoe-trained-%s layers=%d experts=%d topk=%d\n" % (name, L, E, k))
        tok = 0
        for r in range(n_req):
            x = ev[r * step: r * step + T].long()[None].to(dev)
            logits = router_logits(model, x, E, T)
            order = logits.argsort(dim=-1, descending=True)  # [L, T, E]
            for l in range(L):
                use[l] += torch.bincount(order[l, :, :k].reshape(-1), minlength=E)
            f.write("# request %d\n" % r)
            nxt = min(E - k, 4)
            lines = []
            for t in range(T):
                for l in range(L):
                    row = order[l, t]
                    s = " ".join(map(str, row[:k].tolist()))
                    if nxt:
                        s += " | " + " ".join(map(str, row[k:k + nxt].tolist()))
                    lines.append("%d %d %s\n" % (tok, l, s))
                tok += 1
            f.write("".join(lines))
    share = use.float() / use.sum(dim=1, keepdim=True)
    model.train()
    return dict(trace=os.path.basename(path), trace_tokens=n_req * T,
                expert_share_min=round(share.min().item(), 4),
                expert_share_max=round(share.max().item(), 4),
                unused_experts=int((use == 0).sum().item()))


def router_logits(model, x, E, T):
    """[L, T, E] router outputs of each MoE layer (the gate module's first
    output: logits, or probabilities in the same order), by forward hooks."""
    got, hooks = [], []
    for layer in model.model.layers:
        def grab(mod, inp, out):
            outs = out if isinstance(out, tuple) else (out,)
            t = next(o for o in outs if torch.is_tensor(o) and o.is_floating_point() and o.shape[-1] == E)
            got.append(t.float().reshape(-1, E)[-T:])
        hooks.append(layer.mlp.gate.register_forward_hook(grab))
    try:
        model(input_ids=x, output_router_logits=False)
    finally:
        for h in hooks:
            h.remove()
    return torch.stack(got).cpu()


@torch.no_grad()
def dump_reference(model, ev, out, name):
    """A held-out prompt and its logits from the float32 model on the CPU."""
    m = model.to("cpu", torch.float32).eval()
    ids = ev[1000:1064].long()[None].cpu()
    logits = m(input_ids=ids, output_router_logits=False).logits[0]
    torch.save({"ids": ids[0].clone(), "logits": logits.clone()}, os.path.join(out, name + ".ref.pt"))
    # the checkpoint as saved, loaded back by transformers, gives the same logits
    from transformers import AutoModelForCausalLM
    back = AutoModelForCausalLM.from_pretrained(os.path.join(out, name), dtype=torch.float32).eval()
    diff = (back(input_ids=ids).logits[0] - logits).abs().max().item()
    return dict(ref_tokens=ids.shape[1], reload_max_abs_diff=diff)


TRACE_REQUESTS, TRACE_TOKENS = 8, 1024


def main():
    global TRACE_REQUESTS, TRACE_TOKENS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="fixture,large")
    ap.add_argument("--seconds-fixture", type=float, default=120)
    ap.add_argument("--seconds-large", type=float, default=330)
    ap.add_argument("--text-mb", type=float, default=400)
    ap.add_argument("--trace-requests", type=int, default=TRACE_REQUESTS)
    ap.add_argument("--trace-tokens", type=int, default=TRACE_TOKENS)
    ap.add_argument("--after", help="a command run (in the background) with each model's name once it is saved")
    ap.add_argument("--tiny", action="store_true", help="shrink every shape (a smoke test)")
    a = ap.parse_args()
    TRACE_REQUESTS, TRACE_TOKENS = a.trace_requests, a.trace_tokens
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    tr, ev = load_text(int(a.text_mb * 1e6), seed=0)
    data = torch.from_numpy(tr.copy()).to(dev)
    evt = torch.from_numpy(ev.copy())
    for name in a.models.split(","):
        shape = dict(SHAPES[name])
        if a.tiny:
            shape.update(seq=64, batch=4)
        secs = a.seconds_fixture if name == "fixture" else a.seconds_large
        try:
            train(name, shape, data, evt, secs, dev, a.out)
            if a.after:  # e.g. archive a model's files while the next trains
                os.system("%s %s &" % (a.after, name))
        except Exception:
            import traceback
            traceback.print_exc()
            log("%s: failed" % name)


if __name__ == "__main__":
    main()
