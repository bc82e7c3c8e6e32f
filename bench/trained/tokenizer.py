#!/usr/bin/env python3
"""tokenizer.py DIR: write DIR/tokenizer.json and DIR/tokenizer_config.json,
the byte-level vocabulary of the trained models: token id = byte, each byte
spelled as GPT-2's byte-to-unicode symbol, no merges, no special tokens.
transformers' tokenizers load it as it is; convert_gguf.py adds the one merge
llama.cpp needs (it refuses a gpt2 vocabulary without merges)."""
import json
import os
import sys


def byte_symbols():
    """GPT-2's byte-to-unicode table: symbol of byte b, for b in 0..255."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    sym, n = {}, 0
    for b in range(256):
        if b in keep:
            sym[b] = chr(b)
        else:
            sym[b] = chr(256 + n)
            n += 1
    return [sym[b] for b in range(256)]


def tokenizer_json():
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                          "use_regex": False},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {s: i for i, s in enumerate(byte_symbols())}, "merges": []},
    }


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096,
                   "clean_up_tokenization_spaces": False}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
