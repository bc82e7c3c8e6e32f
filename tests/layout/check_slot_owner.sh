#!/bin/sh
# Description: the slot protocol's shared words change in src/slot.c only.
#
# The slot words, the chunk counters (chunk_next, chunk_left), a load's
# error and fault record, and the residency map are read and written by
# src/slot.c and the inline transitions of src/slot.h; no other file of
# src/ names them. A file that does is printed with the lines.
#
# Usage: check_slot_owner.sh SOURCE_ROOT
set -eu
root=${1:-.}
cd "$root/src"
pattern='ring\.(word|chunk_next|chunk_left|err|fault)\b|->map\['
hits=$(grep -nE "$pattern" $(find . -name '*.c' -o -name '*.h' | sort) |
       grep -v -e '^\./slot\.c:' -e '^\./slot\.h:' || true)
if [ -n "$hits" ]; then
    echo "FAIL: the slot protocol's words used outside src/slot.c and src/slot.h:"
    printf '%s\n' "$hits" | sed 's/^\.\//  src\//'
    exit 1
fi
echo "ok: slot words, chunk counters, load errors and the residency map: src/slot.c only"
