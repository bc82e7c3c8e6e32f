#!/usr/bin/env python3
"""convert_gguf.py MODEL_DIR OUT.gguf TYPE: write a trained model's GGUF with
llama.cpp's own converter (convert_hf_to_gguf.py of the tree named by
$LLAMA_CPP, default ~/.cache/smoe-llama/llama.cpp; TYPE: bf16, q8_0, f32, ...).

The converter asks transformers for the config and the tokenizer. Here a
stand-in `transformers` module answers instead, so that it runs on a
Python with numpy and torch alone: its AutoConfig fails (the converter then
reads config.json, as it does for remote code), its AutoTokenizer reads the
byte vocabulary from tokenizer.json. Two choices are made for the converter,
which would otherwise refuse the vocabulary: the pre-tokenizer is named
"default" (the hash of its test string names no known one; with no merge
that can apply, any splitting gives the same byte ids), and the vocabulary
gets one merge, of the symbols of bytes 0x00 and 0x01, which text never
holds: llama.cpp refuses a gpt2 vocabulary with no merges."""
import json
import os
import sys
import types
from pathlib import Path


class ByteTokenizer:
    def __init__(self, d):
        with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)["model"]["vocab"]
        self.added_tokens_decoder = {}
        self.sym = {i: s for s, i in self.vocab.items()}

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return {}

    def encode(self, text, **kw):
        return list(text.encode("utf-8"))

    def decode(self, ids, **kw):
        return bytes(ids).decode("utf-8", "replace")


def stand_in():
    tf = types.ModuleType("transformers")

    class AutoConfig:
        @staticmethod
        def from_pretrained(*a, **kw):
            raise OSError("no transformers here: the converter reads config.json")

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(d, **kw):
            return ByteTokenizer(d)

    tf.AutoConfig, tf.AutoTokenizer = AutoConfig, AutoTokenizer
    return tf


def main():
    model_dir, out, outtype = sys.argv[1:4]
    llama = Path(os.environ.get("LLAMA_CPP", os.path.expanduser("~/.cache/smoe-llama/llama.cpp")))
    sys.modules["transformers"] = stand_in()
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
        if not hasattr(torch, name):  # an older torch (Debian 12's 1.13): names the converter's
            setattr(torch, name, object())  # tables hold, for dtypes these models never use
    sys.path[:0] = [str(llama / "gguf-py"), str(llama)]
    import gguf
    import convert_hf_to_gguf as conv

    base = sys.modules.get("conversion.base") or conv
    text_model = getattr(base, "TextModel", None) or conv.TextModel
    text_model.get_vocab_base_pre = lambda self, tokenizer: "default"
    init = gguf.SpecialVocab.__init__

    def init_with_merge(self, *a, **kw):
        init(self, *a, **kw)
        if not self.merges:
            sym = ByteTokenizer(model_dir).sym
            self.merges = ["%s %s" % (sym[0], sym[1])]
    gguf.SpecialVocab.__init__ = init_with_merge
    sys.argv = ["convert_hf_to_gguf.py", model_dir, "--outfile", out, "--outtype", outtype]
    conv.main()


if __name__ == "__main__":
    main()
