#!/bin/sh
# make_fixture.sh TRAINED [DEST]: the test fixture from train.py's output
# directory TRAINED (its fixture model): the transformers checkpoint as
# saved, the byte vocabulary (tokenizer.py), GGUF bf16 and Q8_0 written by
# llama.cpp's converter (convert_gguf.py; $LLAMA_CPP, default
# ~/.cache/smoe-llama/llama.cpp), and reference.npz: a held-out prompt and
# its logits from transformers (float32, CPU). DEST defaults to
# tests/fixtures/trained. $PYTHON: a python3 with numpy and torch.
set -eu
src=$1
here=$(cd "$(dirname "$0")" && pwd)
dest=${2:-$here/../../tests/fixtures/trained}
py=${PYTHON:-python3}
mkdir -p "$dest"
cp "$src/fixture/config.json" "$src/fixture/generation_config.json" \
   "$src/fixture/model.safetensors" "$dest/"
"$py" "$here/tokenizer.py" "$dest"
"$py" "$here/convert_gguf.py" "$dest" "$dest/model-bf16.gguf" bf16
"$py" "$here/convert_gguf.py" "$dest" "$dest/model-q8_0.gguf" q8_0
"$py" - "$src/fixture.ref.pt" "$dest/reference.npz" <<'PY'
import sys, numpy, torch
r = torch.load(sys.argv[1])
numpy.savez(sys.argv[2], ids=r["ids"].numpy().astype("uint8"), logits=r["logits"].numpy())
PY
ls -l "$dest"
du -cb "$dest"/* | tail -n 1
