#!/bin/sh
# The Windows DLL exports exactly the functions of src/smoe_stream.map, no
# more, no fewer (the counterpart of the version script's check on Linux,
# tests/abi/check_exports.sh): its export table, read with MinGW's objdump,
# against the map's global names.
#
# Usage: check_exports.sh smoe_stream-1.dll src/smoe_stream.map
set -eu
dll=$1
map=$2
objdump=${OBJDUMP:-x86_64-w64-mingw32-objdump}
command -v "$objdump" > /dev/null 2>&1 || {
    echo "SKIP: $objdump not found (Debian package binutils-mingw-w64-x86-64)"
    exit 77
}
want=$(sed -n 's/^ *\(smoe_[a-z0-9_]*\);.*/\1/p' "$map" | sort)
have=$("$objdump" -p "$dll" |
    sed -n '/^\[Ordinal\/Name Pointer\] Table/,/^$/s/^[[:space:]]*\[ *[0-9]*\] \([^ ]*\)$/\1/p' |
    sort)
if [ "$want" = "$have" ]; then
    echo "ok: $(basename "$dll") exports the $(echo "$want" | wc -l) functions of $(basename "$map")"
    exit 0
fi
echo "FAIL: $(basename "$dll")'s export table differs from $(basename "$map") (< map, > DLL):"
tmp=${TMPDIR:-/tmp}/smoe-exports.$$
echo "$want" > "$tmp.want"
echo "$have" > "$tmp.have"
diff "$tmp.want" "$tmp.have" || true
rm -f "$tmp.want" "$tmp.have"
exit 1
