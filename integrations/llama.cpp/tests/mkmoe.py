#!/usr/bin/env python3
"""mkmoe.py ARCH OUT.gguf [--seed N]: write a tiny MoE GGUF of one of the
architectures llama.cpp supports, with random weights and the real tensor
names, shapes and metadata of that architecture (llama.cpp's
src/models/<arch>.cpp). Uses the llama.cpp tree's gguf-py (PYTHONPATH) and
numpy. The tokenizer is "none" with <arch>.vocab_size, so prompts are
given as token ids; with --byte-vocab a byte-level GPT-2 vocabulary
instead (token id = byte, the 256 byte symbols in byte order, one merge of
two control-byte symbols, the rest control tokens), so that llama.cpp's own
programs can tokenize text prompts.

--near-identity: every tensor that writes into the residual stream
(attention output, expert and shared-expert down projections, the dense
FFN's) is 10^4 times smaller, so each layer passes its input on almost
unchanged while every layer keeps its own router (gpt-oss's router bias
as large as its logits, and the norm weights before the routers far from
one): layer L+1's router
applied to layer L's hidden state then chooses what L+1 will (the router
lookahead's test).

Also: mkmoe.py qwen3-30b-a3b|gpt-oss-20b OUT.gguf [--layers N] [--type T]:
a model shaped like a real one (Q4_K, MXFP4 experts; Q8_0 dense), with
random blocks written without quantizing, for bench/llama.
"""
import argparse
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

# name: (gguf arch, expert type, dims); dims: embd, heads, kv heads, head
# dim, layers, experts, top-k, expert ffn width, dense ffn width, vocab
ARCHS = {
    "qwen3moe": ("qwen3moe", "BF16", dict(embd=256, head=4, kv=2, hd=64, layers=3, experts=8,
                                          k=2, ff=256, vocab=512)),
    "mixtral": ("llama", "Q8_0", dict(embd=256, head=4, kv=2, hd=64, layers=3, experts=8, k=2,
                                      ff=160, vocab=512)),
    "gpt-oss": ("gpt-oss", "F16", dict(embd=256, head=4, kv=2, hd=64, layers=3, experts=8, k=4,
                                       ff=96, vocab=512)),
    "olmoe": ("olmoe", "F32", dict(embd=256, head=4, kv=4, hd=64, layers=3, experts=16, k=4,
                                   ff=256, vocab=512)),
    "glm4moe": ("glm4moe", "F16", dict(embd=256, head=4, kv=2, hd=64, layers=3, experts=8, k=2,
                                       ff=128, dense_ff=384, vocab=512)),
    # Shapes of real models, for the benchmark (fewer layers when asked).
    "qwen3-30b-a3b": ("qwen3moe", "Q4_K", dict(embd=2048, head=32, kv=4, hd=128, layers=48,
                                              experts=128, k=8, ff=768, vocab=151936)),
    "gpt-oss-20b": ("gpt-oss", "MXFP4", dict(embd=2880, head=64, kv=8, hd=64, layers=24,
                                           experts=32, k=4, ff=2880, vocab=201088)),
}


# Raw random blocks for the benchmark's large models: valid blocks of the
# type, made without quantizing (fast), with zero-mean weights (so that the
# hidden state, and with it the routing, varies from token to token):
# (block bytes, elements). The header (scales) is set in Writer._data.
RAW = {"Q8_0": (34, 32), "Q4_K": (144, 256), "MXFP4": (17, 32)}
QTYPES = {"BF16": QT.BF16, "Q8_0": QT.Q8_0, "Q4_K": QT.Q4_K, "MXFP4": QT.MXFP4}


class Writer:
    """Tensors are described first and generated one at a time while the
    file is written, so a model of many GiB never sits in memory."""

    def __init__(self, path, arch, rng, raw=False):
        self.w = gguf.GGUFWriter(path, arch)
        self.arch = arch
        self.rng = rng
        self.raw = raw
        self.items = []

    def kv(self, key, value):
        k = key.replace("{arch}", self.arch)
        if isinstance(value, bool):
            self.w.add_bool(k, value)
        elif isinstance(value, int):
            self.w.add_uint32(k, value)
        elif isinstance(value, float):
            self.w.add_float32(k, value)
        else:
            self.w.add_string(k, value)

    def tensor(self, name, ne, qtype="F32", scale=None, offset=0.0):
        """ne: ggml order, innermost first; scale: standard deviation."""
        if scale is None:
            scale = 0.02 if self.raw else 0.05
        self.items.append((name, list(ne), qtype, scale, offset))

    def norm(self, name, n):
        self.tensor(name, [n], "F32", scale=0.02, offset=1.0)

    def _data(self, ne, qtype, scale, offset):
        shape = tuple(reversed(ne))
        if self.raw and qtype in RAW:
            bb, be = RAW[qtype]
            rows = int(np.prod(shape[:-1]))
            blocks = rows * (shape[-1] // be)
            q = self.rng.integers(0, 256, size=(blocks, bb), dtype=np.uint8)
            if qtype == "Q8_0":    # int8 values times d: standard deviation ~ scale
                q[:, 0:2] = np.frombuffer(np.float16(scale / 73.0).tobytes(), np.uint8)
            elif qtype == "Q4_K":  # every sub-block's min equals its scale, dmin = 7.5 d:
                d = scale / 40.0   # w = d * sc * (q - 7.5), sc 17 or 1
                q[:, 0:4] = np.frombuffer(np.array([d, 7.5 * d], np.float16).tobytes(), np.uint8)
                q[:, 4:16] = 0x11
            else:                  # MXFP4: E8M0 exponent; E2M1 values have random signs
                q[:, 0] = 127 + int(np.round(np.log2(scale / 2.5)))
            return q.reshape(shape[:-1] + (shape[-1] // be * bb,))
        data = (self.rng.standard_normal(shape, dtype=np.float32) * scale + offset).astype(np.float32)
        if qtype == "F32":
            return data
        if qtype == "F16":
            return data.astype(np.float16)
        return gguf.quants.quantize(data, QTYPES[qtype])

    def finish(self):
        for name, ne, qtype, scale, offset in self.items:
            shape = tuple(reversed(ne))
            if qtype in ("F32", "F16"):
                dt = np.float32 if qtype == "F32" else np.float16
                n = int(np.prod(shape)) * np.dtype(dt).itemsize
                self.w.add_tensor_info(name, shape, np.dtype(dt), n)
            else:
                t = QTYPES[qtype]
                bs, ts = gguf.GGML_QUANT_SIZES[t]
                bshape = shape[:-1] + (shape[-1] // bs * ts,)
                self.w.add_tensor_info(name, bshape, np.dtype(np.uint8),
                                       int(np.prod(bshape)), raw_dtype=t)
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_ti_data_to_file()
        for name, ne, qtype, scale, offset in self.items:
            self.w.write_tensor_data(self._data(ne, qtype, scale, offset))
        self.w.close()


def byte_vocab(w, V):
    """GPT-2's byte symbols in byte order (token id = byte), the merge of
    bytes 0 and 1 (never in text; llama.cpp wants a merge), control tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    sym, n = {b: b for b in bs}, 0
    for b in range(256):
        if b not in sym:
            sym[b] = 256 + n
            n += 1
    toks = [chr(sym[b]) for b in range(256)] + [chr(sym[0]) + chr(sym[1])]
    toks += [f"<|x{i}|>" for i in range(len(toks), V)]
    w.w.add_tokenizer_model("gpt2")
    w.w.add_tokenizer_pre("default")
    w.w.add_token_list(toks)
    w.w.add_token_types([1] * 257 + [3] * (V - 257))
    w.w.add_token_merges([chr(sym[0]) + " " + chr(sym[1])])
    w.w.add_bos_token_id(257)
    w.w.add_eos_token_id(258)
    w.w.add_add_bos_token(False)


def write(kind, path, seed, layers=None, etype=None, near_identity=False, vocab=False):
    arch, default_etype, d = ARCHS[kind]
    etype = etype or default_etype
    d = dict(d)
    if layers:
        d["layers"] = layers
    rng = np.random.default_rng(seed)
    big = kind in ("qwen3-30b-a3b", "gpt-oss-20b")
    w = Writer(path, arch, rng, raw=big)
    if near_identity:
        plain = w.tensor

        def quiet(name, ne, qtype="F32", scale=None, offset=0.0):
            if any(p in name for p in ("attn_output.", "ffn_down")):
                scale = (0.05 if scale is None else scale) * 1e-4
            if "ffn_gate_inp.bias" in name:  # as large as the logits: it decides
                scale = 8.0
            if "ffn_norm" in name or "post_attention_norm" in name:
                scale = 0.5  # each layer's router sees its own scaling of the state
            plain(name, ne, qtype, scale, offset)
        w.tensor = quiet
    E, H, KV, HD, L = d["embd"], d["head"], d["kv"], d["hd"], d["layers"]
    X, K, FF, V = d["experts"], d["k"], d["ff"], d["vocab"]
    w.kv("general.name", f"tiny-{kind}")
    w.kv("general.file_type", 0)
    if vocab:
        byte_vocab(w, V)
    else:
        w.kv("tokenizer.ggml.model", "none")
    w.kv("{arch}.vocab_size", V)
    w.kv("{arch}.context_length", 4096)
    w.kv("{arch}.embedding_length", E)
    w.kv("{arch}.block_count", L)
    w.kv("{arch}.feed_forward_length", d.get("dense_ff", FF))
    w.kv("{arch}.attention.head_count", H)
    w.kv("{arch}.attention.head_count_kv", KV)
    w.kv("{arch}.attention.key_length", HD)
    w.kv("{arch}.attention.value_length", HD)
    w.kv("{arch}.rope.dimension_count", HD)
    w.kv("{arch}.rope.freq_base", 10000.0)
    w.kv("{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    w.kv("{arch}.expert_count", X)
    w.kv("{arch}.expert_used_count", K)
    w.kv("{arch}.expert_feed_forward_length", FF)
    if arch == "gpt-oss":
        w.kv("{arch}.attention.sliding_window", 128)
    if arch == "glm4moe":
        w.kv("{arch}.expert_shared_count", 1)
        w.kv("{arch}.leading_dense_block_count", 1)
        w.kv("{arch}.expert_weights_scale", 1.0)
        w.kv("{arch}.expert_weights_norm", True)
        w.kv("{arch}.expert_gating_func", 2)
    dense_t = "Q8_0" if big else ("F32" if etype == "F32" else "F16")

    w.tensor("token_embd.weight", [E, V], dense_t, scale=0.5)
    w.norm("output_norm.weight", E)
    w.tensor("output.weight", [E, V], dense_t)
    for i in range(L):
        b = f"blk.{i}."
        w.norm(b + "attn_norm.weight", E)
        w.tensor(b + "attn_q.weight", [E, H * HD], dense_t)
        w.tensor(b + "attn_k.weight", [E, KV * HD], dense_t)
        w.tensor(b + "attn_v.weight", [E, KV * HD], dense_t)
        w.tensor(b + "attn_output.weight", [H * HD, E], dense_t)
        if arch in ("qwen3moe", "glm4moe"):
            w.norm(b + "attn_q_norm.weight", HD)
            w.norm(b + "attn_k_norm.weight", HD)
        if arch == "olmoe":
            w.norm(b + "attn_q_norm.weight", H * HD)
            w.norm(b + "attn_k_norm.weight", KV * HD)
        if arch in ("gpt-oss", "glm4moe"):
            w.norm(b + "post_attention_norm.weight", E)
        else:
            w.norm(b + "ffn_norm.weight", E)
        if arch == "gpt-oss":
            w.tensor(b + "attn_sinks.weight", [H])
            w.tensor(b + "attn_output.bias", [E])
        if arch == "glm4moe" and i == 0:  # the leading dense layer
            w.tensor(b + "ffn_gate.weight", [E, d["dense_ff"]], dense_t)
            w.tensor(b + "ffn_up.weight", [E, d["dense_ff"]], dense_t)
            w.tensor(b + "ffn_down.weight", [d["dense_ff"], E], dense_t)
            continue
        w.tensor(b + "ffn_gate_inp.weight", [E, X], "F32", scale=0.1 if big else 0.5)
        w.tensor(b + "ffn_gate_exps.weight", [E, FF, X], etype)
        w.tensor(b + "ffn_up_exps.weight", [E, FF, X], etype)
        w.tensor(b + "ffn_down_exps.weight", [FF, E, X], etype)
        if arch == "gpt-oss":
            w.tensor(b + "ffn_gate_inp.bias", [X])
            w.tensor(b + "ffn_gate_exps.bias", [FF, X])
            w.tensor(b + "ffn_up_exps.bias", [FF, X])
            w.tensor(b + "ffn_down_exps.bias", [E, X])
        if arch == "glm4moe":
            w.tensor(b + "exp_probs_b.bias", [X])
            w.tensor(b + "ffn_gate_shexp.weight", [E, FF], dense_t)
            w.tensor(b + "ffn_up_shexp.weight", [E, FF], dense_t)
            w.tensor(b + "ffn_down_shexp.weight", [FF, E], dense_t)
    w.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", choices=sorted(ARCHS))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--type", choices=["F32", "F16", "BF16", "Q8_0", "Q4_K", "MXFP4"])
    ap.add_argument("--near-identity", action="store_true")
    ap.add_argument("--byte-vocab", action="store_true")
    a = ap.parse_args()
    write(a.arch, a.out, a.seed, a.layers, a.type, a.near_identity, a.byte_vocab)


if __name__ == "__main__":
    sys.exit(main())
