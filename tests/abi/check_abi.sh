#!/bin/sh
# Compare a built libsmoe_stream.so with the ABI baseline of its SONAME,
# tests/abi/libsmoe_stream.so.<major>.abi (libabigail's abidw output; see
# docs/abi.md for the policy this enforces).
#
# Passes when the only differences are ones a minor release may make:
#  - functions added, each in the symbol version node of the release being
#    built (SMOE_<major>.<minor> of CMakeLists.txt's project version);
#  - fields appended to the end of a struct whose first member is
#    size_t struct_size (the library reads and writes only the caller's
#    struct_size bytes, so such a struct may grow).
# Anything else abidiff reports fails, with its report: a removed or changed
# function, a changed type, a field inserted before the end or changed, a
# symbol whose version changed, a struct without struct_size that grew.
# This rule is the only filtering applied; no libabigail suppression file.
#
# Usage: check_abi.sh LIBRARY SOURCE_DIR           compare (ctest: abi_baseline)
#        check_abi.sh --update LIBRARY SOURCE_DIR  write the baseline
#        (tests/abi/update-baseline.sh builds the library and runs --update)
# LIBRARY must carry debug info (RelWithDebInfo or Debug). Exit 77 (ctest:
# skipped) when abigail-tools is missing or the library has no debug info.
set -eu

update=0
if [ "${1:-}" = "--update" ]; then
    update=1
    shift
fi
if [ $# -ne 2 ]; then
    echo "usage: $0 [--update] LIBRARY SOURCE_DIR" >&2
    exit 2
fi
lib=$1
src=$2
skip() {
    echo "SKIP: $*"
    exit 77
}
for t in abidw abidiff; do
    command -v $t > /dev/null 2>&1 || skip "$t not found (Debian package abigail-tools)"
done
[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }
if command -v readelf > /dev/null 2>&1 && ! readelf -S "$lib" | grep -q '\.debug_info'; then
    skip "$lib has no debug info (build with CMAKE_BUILD_TYPE=RelWithDebInfo or Debug)"
fi

version=$(sed -n 's/^project(smoe_stream VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
major=${version%%.*}
rest=${version#*.}
release=$major.${rest%%.*}
baseline=$src/tests/abi/libsmoe_stream.so.$major.abi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Only what the public header declares (private types are dropped: the
# stream's own struct stays the opaque smoe_stream); no source locations or
# paths, so the file depends on the interface and not on the checkout.
abidw --headers-dir "$src/include/smoe" --drop-private-types --no-show-locs \
    --no-corpus-path --no-comp-dir-path --out-file "$tmp/current.abi" "$lib"

if [ "$update" = 1 ]; then
    cp "$tmp/current.abi" "$baseline"
    echo "wrote $baseline ($(grep -c '<elf-symbol ' "$baseline") symbols) from $lib"
    exit 0
fi
[ -f "$baseline" ] || { echo "FAIL: no baseline $baseline (tests/abi/update-baseline.sh writes it)"; exit 1; }

status=0
fail() {
    echo "FAIL: $*"
    status=1
}

# ---- symbols: none removed or moved, new ones only in this release's node ----
sed -n "s/.*<elf-symbol name='\([^']*\)' version='\([^']*\)'.*/\1@\2/p" "$baseline" |
    sort > "$tmp/base.syms"
sed -n "s/.*<elf-symbol name='\([^']*\)' version='\([^']*\)'.*/\1@\2/p" "$tmp/current.abi" |
    sort > "$tmp/cur.syms"
for s in $(comm -23 "$tmp/base.syms" "$tmp/cur.syms"); do
    name=${s%@*}
    now=$(grep "^$name@" "$tmp/cur.syms" || true)
    if [ -n "$now" ]; then
        fail "$name was exported as ${s#*@} and now is ${now#*@}: a symbol never moves"
    else
        fail "$name (${s#*@}) is no longer exported"
    fi
done
for s in $(comm -13 "$tmp/base.syms" "$tmp/cur.syms"); do
    name=${s%@*}
    grep -q "^$name@" "$tmp/base.syms" && continue # reported above
    [ "${s#*@}" = "SMOE_$release" ] ||
        fail "$name is new but exported in ${s#*@}: new functions go into SMOE_$release, the node of the release being built ($version)"
done

# ---- types: abidiff, every change judged against the rule above ----------------
# Structs that may grow: first member size_t struct_size.
sized=$(awk '
    match($0, /^typedef struct smoe_[a-z0-9_]+ *\{/) {
        name = $3; getline
        if ($0 ~ /^[ \t]*size_t[ \t]+struct_size;/) printf "%s ", name
    }' "$src/include/smoe/smoe.h")
rc=0
abidiff --no-added-syms --leaf-changes-only --impacted-interfaces \
    "$baseline" "$tmp/current.abi" > "$tmp/leaf" 2>&1 || rc=$?
if [ $((rc & 3)) -ne 0 ]; then
    cat "$tmp/leaf"
    fail "abidiff could not compare (exit $rc)"
elif [ "$rc" -ne 0 ]; then
    # Leaf report: one block per changed type, "'struct smoe_stats' changed:".
    awk -v sized="$sized" '
        function bad(why) { printf "  not allowed: %s\n", why; nbad++ }
        BEGIN { n = split(sized, a, " "); for (i = 1; i <= n; i++) grow[a[i]] = 1 }
        /^$/ || /^Leaf changes summary/ || /^Changed leaf types summary/ { next }
        /^Removed\/Changed\/Added (functions|variables) summary:/ {
            if ($0 !~ /: 0 Removed, 0 Changed, /) bad($0)
            next
        }
        /^.struct smoe_[a-z0-9_]+. changed:$/ {
            cur = $2; gsub(/[^a-z0-9_]/, "", cur); from = -1; part = ""
            if (!(cur in grow)) bad("struct " cur " has no struct_size and cannot grow: " $0)
            next
        }
        /^[^ ]/ { bad($0); cur = ""; next }
        cur != "" && /^  type size changed from [0-9]+ to [0-9]+ \(in bits\)$/ {
            from = $5 + 0
            if ($7 + 0 <= from) bad(cur ": " $0)
            next
        }
        cur != "" && /^  [0-9]+ data member insertions?:$/ { part = "ins"; next }
        cur != "" && part == "ins" && /^    .*, at offset [0-9]+ \(in bits\)$/ {
            off = $0; sub(/.*, at offset /, "", off); sub(/ .*/, "", off)
            if (from < 0 || off + 0 < from) bad(cur ": inserted before the old end: " $0)
            next
        }
        /^  (one|[0-9]+) impacted interfaces?:$/ { part = "impacted"; next }
        part == "impacted" && /^    / { next }
        { bad((cur != "" ? cur ": " : "") $0) }
        END { exit nbad > 0 }
    ' "$tmp/leaf" > "$tmp/judged" || {
        echo "abidiff (changed types, additions left out):"
        sed 's/^/  /' "$tmp/leaf"
        cat "$tmp/judged"
        fail "incompatible ABI change against $baseline"
    }
fi

# The whole report, additions included, for the log.
abidiff "$baseline" "$tmp/current.abi" > "$tmp/full" 2>&1 || true
if [ "$status" -ne 0 ]; then
    echo "abidiff $baseline, full report:"
    sed 's/^/  /' "$tmp/full"
    echo "ABI check: FAILED (docs/abi.md says what a minor release may change;"
    echo "before $release ships, an intended change to its interface updates the baseline"
    echo "in the same commit: tests/abi/update-baseline.sh)"
    exit 1
fi
if [ "$rc" -ne 0 ] || ! cmp -s "$tmp/base.syms" "$tmp/cur.syms"; then
    echo "compatible changes against $baseline:"
    sed 's/^/  /' "$tmp/full"
fi
echo "ABI check: $(wc -l < "$tmp/cur.syms") symbols, compatible with $(basename "$baseline") ($(wc -l < "$tmp/base.syms") symbols)"
