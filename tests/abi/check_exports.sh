#!/bin/sh
# Check that the public functions agree everywhere they are listed:
#  - every SMOE_API declaration in include/smoe/smoe.h, with its
#    "since X.Y" comment,
#  - the linker version script src/smoe_stream.map, node SMOE_X.Y,
#  - the index in docs/api.md ("- `name()` since X.Y: ..."),
#  - with --lib FILE, the dynamic symbol table of the built library: only
#    the map's symbols, each exported at the map's version (name@@SMOE_X.Y).
# Nodes must be in increasing order and no newer than the release being
# built (VERSION, e.g. 1.0.0).
#
# Usage: check_exports.sh [--lib libsmoe_stream.so] SOURCE_DIR VERSION
# Run by the build (src/CMakeLists.txt) without --lib, and by ctest
# (abi_exports) with it. Prints each mismatch and exits 1 if any.
set -eu

lib=""
if [ "${1:-}" = "--lib" ]; then
    lib=$2
    shift 2
fi
if [ $# -ne 2 ]; then
    echo "usage: $0 [--lib LIBRARY] SOURCE_DIR VERSION" >&2
    exit 2
fi
src=$1
version=$2
header=$src/include/smoe/smoe.h
map=$src/src/smoe_stream.map
docs=$src/docs/api.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# name since, from the header. A declaration runs from SMOE_API to its ';',
# and its "since" comment follows on the same line, or is the comment line
# just before it.
awk -v file="$header" '
    /^[ \t]*#/ { next }
    /SMOE_API/ { collecting = 1; text = "" }
    collecting {
        text = text " " $0
        if (index($0, ";")) {
            collecting = 0
            decl = substr(text, index(text, "SMOE_API"))
            if (!match(decl, /smoe_[a-z0-9_]+[ \t]*\(/)) {
                printf "%s: not a function declaration: %s\n", file, decl > "/dev/stderr"
                bad = 1
                next
            }
            name = substr(decl, RSTART, RLENGTH)
            sub(/[ \t]*\($/, "", name)
            since = ""
            if (match(text, /since [0-9]+\.[0-9]+/))
                since = substr(text, RSTART + 6, RLENGTH - 6)
            else if (prev ~ /^[ \t]*(\/\*|\*)/ && match(prev, /since [0-9]+\.[0-9]+/))
                since = substr(prev, RSTART + 6, RLENGTH - 6)
            print name, (since == "" ? "none" : since)
        }
    }
    { prev = $0 }
    END { exit bad }
' "$header" | sort > "$tmp/header" || { echo "FAIL: cannot read $header" >&2; exit 1; }

# name node, from the map; also checks its shape.
awk -v file="$map" -v version="$version" '
    function vnum(v,   a) { split(v, a, "."); return a[1] * 1000 + a[2] }
    BEGIN { split(version, rv, "."); release = rv[1] * 1000 + rv[2] }
    {
        line = $0
        # strip comments, which may span lines
        while (1) {
            if (incomment) {
                e = index(line, "*/")
                if (!e) { line = ""; break }
                line = substr(line, e + 2); incomment = 0
            }
            s = index(line, "/*")
            if (!s) break
            rest = substr(line, s + 2)
            e = index(rest, "*/")
            if (e) line = substr(line, 1, s - 1) " " substr(rest, e + 2)
            else { line = substr(line, 1, s - 1); incomment = 1 }
        }
        gsub(/[ \t]+/, " ", line)
        n = split(line, tok, /[ ]/)
        for (i = 1; i <= n; i++) {
            t = tok[i]
            if (t == "") continue
            if (t ~ /^SMOE_[0-9]+\.[0-9]+$/ && node == "") { pending = t; continue }
            if (t == "{") {
                if (pending == "") { printf "%s:%d: \"{\" without a node name\n", file, NR > "/dev/stderr"; bad = 1 }
                node = pending; pending = ""; part = ""
                v = substr(node, 6)
                if (nodes > 0 && vnum(v) <= last) {
                    printf "%s:%d: node %s is not newer than the node before it\n", file, NR, node > "/dev/stderr"; bad = 1
                }
                if (vnum(v) > release) {
                    printf "%s:%d: node %s is newer than the release being built, %s\n", file, NR, node, version > "/dev/stderr"; bad = 1
                }
                last = vnum(v); nodes++
                continue
            }
            if (t == "global:") { part = "global"; continue }
            if (t == "local:") { part = "local"; continue }
            if (t ~ /^}/) { node = ""; part = ""; continue }
            if (node == "") continue  # "SMOE_1.0;" after "}": the parent node
            sub(/;$/, "", t)
            if (part == "local") {
                if (t != "*") { printf "%s:%d: local entry %s: only \"*\" belongs there\n", file, NR, t > "/dev/stderr"; bad = 1 }
                haslocal = 1
                continue
            }
            if (t !~ /^smoe_[a-z0-9_]+$/) {
                printf "%s:%d: %s is not a public name (smoe_*; no wildcards)\n", file, NR, t > "/dev/stderr"; bad = 1
                continue
            }
            print t, substr(node, 6)
        }
    }
    END {
        if (!haslocal) { printf "%s: no \"local: *;\": internal symbols would be exported\n", file > "/dev/stderr"; bad = 1 }
        exit bad
    }
' "$map" | sort > "$tmp/map" || fail_map=1

# name since, from the docs index lines
sed -n 's/^- `\(smoe_[a-z0-9_]*\)()` since \([0-9][0-9]*\.[0-9][0-9]*\):.*/\1 \2/p' "$docs" |
    sort > "$tmp/docs"

status=${fail_map:-0}
for f in header map docs; do
    d=$(cut -d' ' -f1 "$tmp/$f" | uniq -d)
    if [ -n "$d" ]; then
        echo "FAIL: listed twice in the $f: $d"
        status=1
    fi
done

# Compare name by name.
join -a1 -a2 -e - -o 0,1.2,2.2 "$tmp/header" "$tmp/map" > "$tmp/hm"
join -a1 -a2 -e - -o 0,1.2,1.3,2.2 "$tmp/hm" "$tmp/docs" > "$tmp/all"
while read -r name hsince mnode dsince; do
    if [ "$hsince" = - ]; then
        where=""
        [ "$mnode" = - ] || where="src/smoe_stream.map"
        [ "$dsince" = - ] || where="${where:+$where and }docs/api.md"
        echo "FAIL: $name is in $where but not declared SMOE_API in include/smoe/smoe.h"
        status=1
        continue
    fi
    if [ "$hsince" = none ]; then
        echo "FAIL: include/smoe/smoe.h: $name has no \"since X.Y\" comment"
        status=1
        continue
    fi
    if [ "$mnode" = - ]; then
        echo "FAIL: $name (since $hsince) is not in src/smoe_stream.map: add it to node SMOE_$hsince"
        status=1
    elif [ "$mnode" != "$hsince" ]; then
        echo "FAIL: $name is since $hsince in include/smoe/smoe.h but in node SMOE_$mnode of src/smoe_stream.map (a symbol never moves: fix the header's comment, or put a new function in the new release's node)"
        status=1
    fi
    if [ "$dsince" = - ]; then
        echo "FAIL: $name is not in the index of docs/api.md: add a line \"- \`$name()\` since $hsince: ...\""
        status=1
    elif [ "$dsince" != "$hsince" ]; then
        echo "FAIL: docs/api.md says $name is since $dsince, include/smoe/smoe.h says $hsince"
        status=1
    fi
done < "$tmp/all"

if [ -n "$lib" ]; then
    if ! command -v nm > /dev/null 2>&1; then
        echo "FAIL: nm not found (binutils)"
        exit 1
    fi
    # "T smoe_open@@SMOE_1.0"; version nodes themselves show as "A SMOE_1.0".
    nm -D --defined-only "$lib" > "$tmp/nm"
    awk '$2 != "A" { print $3 }' "$tmp/nm" | sort > "$tmp/dyn"
    awk '{ print $1 "@@SMOE_" $2 }' "$tmp/map" | sort > "$tmp/want"
    extra=$(comm -23 "$tmp/dyn" "$tmp/want")
    missing=$(comm -13 "$tmp/dyn" "$tmp/want")
    if [ -n "$extra" ]; then
        echo "FAIL: $lib exports symbols the map does not list at that version:"
        echo "$extra" | sed 's/^/    /'
        status=1
    fi
    if [ -n "$missing" ]; then
        echo "FAIL: $lib lacks symbols the map lists:"
        echo "$missing" | sed 's/^/    /'
        status=1
    fi
    nodes=$(awk '$2 == "A" { print $3 }' "$tmp/nm" | sort | tr '\n' ' ')
    echo "$lib: $(wc -l < "$tmp/dyn") symbols, nodes: $nodes"
fi

if [ "$status" -ne 0 ]; then
    echo "public functions: header, src/smoe_stream.map and docs/api.md disagree (docs/abi.md)"
    exit 1
fi
echo "public functions: $(wc -l < "$tmp/header") in include/smoe/smoe.h, src/smoe_stream.map and docs/api.md agree"
