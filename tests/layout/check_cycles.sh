#!/bin/sh
# Description: no circle of calls between the files of a part of the tree.
#
# From the object files (nm): file A uses file B when A leaves undefined a
# global symbol that B defines. Uses must run one way: a file that uses
# another, directly or through others, is never used back by it. A circle
# is printed with the symbols that make each of its steps.
#
# Usage: check_cycles.sh NAME OBJECTS...
#   NAME     what the objects are, for the messages ("src", "tools")
#   OBJECTS  object files, or directories searched for *.o; an argument
#            may hold several, separated by ';' (a CMake list)
# Exits 0 when there is no circle, 1 when there is one, 2 on bad use.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 NAME OBJECTS..." >&2; exit 2; }
name=$1
shift
NM=${NM:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

: > "$tmp/objs"
for a in "$@"; do
    printf '%s\n' "$a" | tr ';' '\n' | while IFS= read -r p; do
        [ -n "$p" ] || continue
        if [ -d "$p" ]; then
            find "$p" -name '*.o' -type f
        else
            printf '%s\n' "$p"
        fi
    done >> "$tmp/objs"
done
sort -u "$tmp/objs" -o "$tmp/objs"
n=$(wc -l < "$tmp/objs")
[ "$n" -gt 0 ] || { echo "FAIL: $name: no object files in $*"; exit 1; }

# "file D symbol" for every global definition, "file U symbol" for every use.
# A file is named by its source: .../CMakeFiles/x.dir/platform/park.c.o is
# platform/park.c.
while IFS= read -r o; do
    f=$(printf '%s\n' "$o" | sed -e 's|.*/CMakeFiles/[^/]*\.dir/||' -e 's|\.o$||')
    "$NM" -P "$o" | awk -v f="$f" '
        $2 ~ /^[TDBRVWCGS]$/ { print f, "D", $1 }
        $2 ~ /^[Uvw]$/ { print f, "U", $1 }'
done < "$tmp/objs" > "$tmp/syms"

awk -v name="$name" -v nfiles="$n" '
    $2 == "D" { def[$3] = $1; next }
    { use[NR] = $0 }
    END {
        # direct uses, with the symbols behind each
        for (i in use) {
            split(use[i], u, " ")
            if (!(u[3] in def) || def[u[3]] == u[1]) continue
            a = u[1]; b = def[u[3]]
            files[a]; files[b]
            if (!((a, b) in edge)) edge[a, b] = u[3]
            else if (index(" " edge[a, b] " ", " " u[3] " ") == 0) edge[a, b] = edge[a, b] " " u[3]
        }
        for (a in files) for (b in files) if ((a, b) in edge) reach[a, b] = 1
        # every file each file reaches (Warshall)
        for (k in files) for (a in files) if ((a, k) in reach)
            for (b in files) if ((k, b) in reach) reach[a, b] = 1
        bad = 0
        for (a in files) {
            if (!((a, a) in reach) || (a in done)) continue
            # a circle: every file a reaches and that reaches a back
            bad++
            members = ""
            for (b in files) if (((a, b) in reach && (b, a) in reach) || b == a) {
                done[b]; members = members " " b; inc[b] = bad
            }
            printf "FAIL: %s: a circle of uses between%s\n", name, members
            for (x in files) for (y in files)
                if ((x, y) in edge && inc[x] == bad && inc[y] == bad)
                    printf "  %s uses %s: %s\n", x, y, edge[x, y]
        }
        if (bad) exit 1
        ne = 0
        for (e in edge) ne++
        printf "ok: %s: %d files, %d uses between them, no circle\n", name, nfiles, ne
    }' "$tmp/syms"
