#!/usr/bin/python3
"""Write a GGUF of gpt-oss-20b's shape, with random weights, for the index
vault figures (docs/packing.md, "Index vaults: time and throughput").

gpt-oss-20b's layer, expert and routing shape (24 layers x 32 experts,
top-4, hidden size 2880), its tensor names and types as llama.cpp converts
it (MXFP4 experts, gate and up apart, with F32 biases; Q8_0 attention and
embeddings), but each expert's FFN width halved to 1440 (about 7 GB in
all instead of 13, so that this file and a packed vault of it fit a shared
disk together). The bytes are random: nothing decodes them.

Written with gguf-py from a llama.cpp tree (the writer llama.cpp's own
converters use): the tensor infos first, then each tensor streamed to the
file, so memory stays near one tensor.

Usage: bench/gguf_gptoss.py LLAMA_CPP_DIR OUT.gguf [--ffn N]
Needs numpy (Debian: python3-numpy) and the tree's gguf-py.
"""
import argparse
import os
import sys

import numpy as np

LAYERS, EXPERTS, TOP_K, HIDDEN = 24, 32, 4, 2880
VOCAB, HEADS, KV_HEADS, HEAD_DIM = 201088, 64, 8, 64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_cpp")
    ap.add_argument("out")
    ap.add_argument("--ffn", type=int, default=1440, help="expert FFN width (gpt-oss-20b: 2880)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.llama_cpp, "gguf-py"))
    import gguf  # noqa: E402

    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(a.seed)
    ffn = a.ffn

    def qbytes(qtype, shape):
        """uint8 shape of a quantised tensor: rows of bytes (shape innermost last)."""
        blk, bb = gguf.GGML_QUANT_SIZES[qtype]
        return tuple(shape[:-1]) + (shape[-1] // blk * bb,)

    # name, numpy shape (outermost first; quantised: elements), raw type or None (F32)
    tensors = [("token_embd.weight", (VOCAB, HIDDEN), Q.Q8_0)]
    for l in range(LAYERS):
        b = "blk.%d." % l
        tensors += [
            (b + "attn_norm.weight", (HIDDEN,), None),
            (b + "attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), Q.Q8_0),
            (b + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), Q.Q8_0),
            (b + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), Q.Q8_0),
            (b + "attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), Q.Q8_0),
            (b + "attn_sinks.weight", (HEADS,), None),
            (b + "post_attention_norm.weight", (HIDDEN,), None),
            (b + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), None),
            (b + "ffn_gate_inp.bias", (EXPERTS,), None),
            (b + "ffn_gate_exps.weight", (EXPERTS, ffn, HIDDEN), Q.MXFP4),
            (b + "ffn_gate_exps.bias", (EXPERTS, ffn), None),
            (b + "ffn_up_exps.weight", (EXPERTS, ffn, HIDDEN), Q.MXFP4),
            (b + "ffn_up_exps.bias", (EXPERTS, ffn), None),
            (b + "ffn_down_exps.weight", (EXPERTS, HIDDEN, ffn), Q.MXFP4),
            (b + "ffn_down_exps.bias", (EXPERTS, HIDDEN), None),
        ]
    tensors += [("output_norm.weight", (HIDDEN,), None), ("output.weight", (VOCAB, HIDDEN), Q.Q8_0)]

    w = gguf.GGUFWriter(a.out, "gpt-oss")
    w.add_name("gpt-oss-20b shape (random weights, expert FFN %d)" % ffn)
    w.add_block_count(LAYERS)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(ffn)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(TOP_K)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_context_length(131072)
    for name, shape, qt in tensors:
        if qt is None:
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            bshape = qbytes(qt, shape)
            w.add_tensor_info(name, bshape, np.dtype(np.uint8), int(np.prod(bshape)), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for name, shape, qt in tensors:
        if qt is None:
            arr = rng.standard_normal(shape, dtype=np.float32) * 0.02
        else:
            bshape = qbytes(qt, shape)
            arr = np.frombuffer(rng.bytes(int(np.prod(bshape))), dtype=np.uint8).reshape(bshape)
        w.write_tensor_data(arr)
        total += arr.nbytes
    w.close()
    print("%s: %d tensors, %.2f GiB of data" % (a.out, len(tensors), total / 2**30))


if __name__ == "__main__":
    main()
