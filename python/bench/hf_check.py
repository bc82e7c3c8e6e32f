"""Patched transformers models against unpatched ones, for each MoE
architecture stream_experts covers (docs/python.md, "Checking real architectures").

For each architecture: a small config with random weights, saved with
save_pretrained, packed with `smoe pack` ($SMOE_TOOL), then
- CPU, float32 and bfloat16: logits of the patched model equal to the
  unpatched model's bit for bit (torch.equal), and generate() the same tokens;
- GPU (if any), bfloat16: 64 greedy tokens from generate() identical, and
  the largest difference between the two models' logits over those steps.

    python3 hf_check.py OUTDIR [ARCH ...]

Prints one line per check and writes OUTDIR/hf_check.json.
"""
import glob
import json
import os
import subprocess
import sys
import time
import traceback

import torch
import transformers
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import smoe_stream  # noqa: E402
from smoe_stream.hf import stream_experts  # noqa: E402

COMMON = dict(vocab_size=256, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
              initializer_range=0.08, tie_word_embeddings=False, pad_token_id=0,
              bos_token_id=1, eos_token_id=2)
ARCHS = {
    "mixtral": ("MixtralConfig", dict(num_local_experts=8, num_experts_per_tok=2,
                                      intermediate_size=32)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(num_experts=8, num_experts_per_tok=2,
                                         moe_intermediate_size=32, intermediate_size=64,
                                         shared_expert_intermediate_size=48,
                                         decoder_sparse_step=1, mlp_only_layers=[])),
    "qwen3_moe": ("Qwen3MoeConfig", dict(num_experts=8, num_experts_per_tok=2,
                                         moe_intermediate_size=32, intermediate_size=64,
                                         decoder_sparse_step=1, mlp_only_layers=[],
                                         norm_topk_prob=True)),
    "olmoe": ("OlmoeConfig", dict(num_experts=8, num_experts_per_tok=2, intermediate_size=32)),
    "gpt_oss": ("GptOssConfig", dict(num_local_experts=8, num_experts_per_tok=2,
                                     intermediate_size=32, sliding_window=16,
                                     layer_types=["sliding_attention", "full_attention",
                                                  "sliding_attention"])),
    "deepseek_v3": ("DeepseekV3Config", dict(n_routed_experts=8, num_experts_per_tok=2,
                                             moe_intermediate_size=32, intermediate_size=64,
                                             n_shared_experts=1, first_k_dense_replace=1,
                                             n_group=2, topk_group=1, kv_lora_rank=16,
                                             q_lora_rank=32, qk_rope_head_dim=8,
                                             qk_nope_head_dim=8, v_head_dim=16,
                                             head_dim=8, rope_scaling=None)),
    "glm4_moe": ("Glm4MoeConfig", dict(n_routed_experts=8, num_experts_per_tok=2,
                                       moe_intermediate_size=32, intermediate_size=64,
                                       n_shared_experts=1, first_k_dense_replace=1,
                                       n_group=1, topk_group=1)),
    "llama4": ("Llama4TextConfig", dict(num_local_experts=8, num_experts_per_tok=1,
                                        intermediate_size=32, intermediate_size_mlp=64,
                                        interleave_moe_layer_step=1, attention_chunk_size=64)),
}
FLAGS = smoe_stream.OPEN_ALLOW_BUFFERED | smoe_stream.OPEN_NO_PREWARM | smoe_stream.OPEN_NO_FREQ


def load(d, dtype, device=None):
    kw = {"dtype": dtype}
    if device:
        kw["device_map"] = device
    return AutoModelForCausalLM.from_pretrained(d, **kw).eval()


def gen(model, prompt, n):
    out = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    return out.sequences, torch.stack(out.logits)


def expert_keys(d):
    from safetensors import safe_open
    keys = []
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        with safe_open(f, "pt") as sf:
            keys += [k for k in sf.keys() if ".experts." in k]
    return keys


def check(arch, root, log):
    cls, extra = ARCHS[arch]
    cfg = getattr(transformers, cls)(**dict(COMMON, **extra))
    d = os.path.join(root, arch)
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    m.save_pretrained(d)
    ename = [n for n, _ in m.named_modules() if n.endswith(".experts")][0]
    src = type(m.get_submodule(ename))
    block = type(m.get_submodule(ename.rsplit(".", 1)[0]))
    res = {"model_class": type(m).__name__, "experts_class": src.__name__,
           "experts_module": ename}
    import inspect
    with open(os.path.join(root, "..", "sources.txt"), "a") as f:
        for c in (block, src):
            try:
                f.write("### %s: %s\n%s\n" % (arch, c.__name__, inspect.getsource(c)))
            except (OSError, TypeError):
                pass
    del m
    keys = expert_keys(d)
    res["checkpoint_expert_tensors"] = len(keys)
    res["checkpoint_expert_names"] = keys[:3] + (["..."] if len(keys) > 3 else [])
    vault = d + ".smoe"
    p = subprocess.run([os.environ["SMOE_TOOL"], "pack", "--quiet", "--out", vault, d],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("smoe pack: " + p.stderr)
    res["pack"] = p.stdout.strip().splitlines()[:2]
    torch.manual_seed(1)
    prompt = torch.randint(3, 256, (2, 12))
    for dtype in (torch.float32, torch.bfloat16):
        tag = "cpu_" + str(dtype).split(".")[1]
        with torch.no_grad():
            ref = load(d, dtype)
            want = ref(prompt).logits
            want_seq, _ = gen(ref, prompt, 8)
            del ref
            pat = load(d, dtype)
            h = stream_experts(pat, vault, workers=4, flags=FLAGS)
            left = sum(q.numel() for n, q in pat.named_parameters() if ".experts." in n)
            got = pat(prompt).logits
            got_seq, _ = gen(pat, prompt, 8)
            st = h.stats()
            h.close()
        res[tag] = {"logits_equal": bool(torch.equal(got, want)),
                    "max_abs_diff": float((got.float() - want.float()).abs().max()),
                    "generate_equal": bool(torch.equal(got_seq, want_seq)),
                    "expert_params_left": int(left), "claims": int(st["claims"])}
        log("%-12s %-15s logits equal %-5s (max diff %.3g), generate equal %s, "
            "expert parameters left %d, claims %d" % (arch, tag, res[tag]["logits_equal"],
                                                      res[tag]["max_abs_diff"],
                                                      res[tag]["generate_equal"], left,
                                                      st["claims"]))
    if torch.cuda.is_available():
        with torch.no_grad():
            ref = load(d, torch.bfloat16, "cuda")
            pg = prompt.cuda()
            want_seq, want_l = gen(ref, pg, 64)
            del ref
            pat = load(d, torch.bfloat16, "cuda")
            h = stream_experts(pat, vault, workers=8, flags=FLAGS)
            got_seq, got_l = gen(pat, pg, 64)
            st = h.stats()
            h.close()
        same = bool(torch.equal(got_seq, want_seq))
        first = int((got_seq != want_seq).any(0).nonzero()[0]) if not same else None
        n = got_l.shape[0] if same else max(0, first - prompt.shape[1])
        diff = float((got_l[:n].float() - want_l[:n].float()).abs().max()) if n else float("nan")
        res["gpu_bfloat16"] = {"tokens_equal_64": same, "first_difference": first,
                               "max_abs_logit_diff": diff, "claims": int(st["claims"])}
        log("%-12s %-15s 64 greedy tokens equal %-5s, max |logit diff| %.3g, claims %d"
            % (arch, "gpu_bfloat16", same, diff, st["claims"]))
    return res


def main():
    root = sys.argv[1]
    archs = sys.argv[2:] or list(ARCHS)
    os.makedirs(root, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)
    log("transformers %s, torch %s, smoe_stream %s (%s)" % (
        transformers.__version__, torch.__version__, smoe_stream.library_version,
        smoe_stream.library_path))
    results = {}
    for a in archs:
        t = time.time()
        try:
            results[a] = check(a, os.path.join(root, "models"), log)
        except Exception:
            tb = traceback.format_exc()
            results[a] = {"error": tb}
            log("%-12s FAILED\n%s" % (a, tb))
        results[a]["seconds"] = round(time.time() - t, 1)
    with open(os.path.join(root, "hf_check.json"), "w") as f:
        json.dump(results, f, indent=1)
    bad = [a for a, r in results.items() if "error" in r or not all(
        v.get("logits_equal", True) and v.get("generate_equal", True) and
        v.get("tokens_equal_64", True) for v in r.values() if isinstance(v, dict))]
    log("hf_check: %d of %d architectures pass%s" % (len(results) - len(bad), len(results),
                                                     (": failing " + " ".join(bad)) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
