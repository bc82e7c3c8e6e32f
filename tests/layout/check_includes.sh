#!/bin/sh
# Description: includes within src/ run one way, and the tool reaches the
# library only through include/smoe/smoe.h and src/smoe_tier.h.
#
# A module is a header and the source file of the same name beside it
# (vault/source.h and vault/source.c); a file without a partner is a module
# of its own. Module A uses module B when a file of A includes B's header.
# Uses must run one way: a module never includes, directly or through
# others, a header of a module that includes it. So a header of plain data
# that the stream object embeds (fill/prewarm_state.h) sits below
# internal.h, and the code that runs on it (fill/prewarm.c, which includes
# internal.h) above. The includes listed in UP run back up on purpose
# (src/README, "Includes" says why); every other circle fails, printed with
# the includes that make it.
#
# Usage: check_includes.sh SOURCE_ROOT
# Exits 0 when both hold, 1 when one does not.
set -eu
root=${1:-.}
UP="slot.c>internal.h"
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# "module included-module file header" for every include that resolves in
# src/: beside the including file first, then from src/ (the include path).
find src -name '*.c' -o -name '*.h' | sort | while IFS= read -r f; do
    d=$(dirname "$f")
    sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while IFS= read -r h; do
        if [ -f "$d/$h" ]; then p="$d/$h"; elif [ -f "src/$h" ]; then p="src/$h"; else continue; fi
        p=${p#src/}
        g=${f#src/}
        printf '%s %s %s %s\n' "${g%.*}" "${p%.*}" "$g" "$p"
    done
done > "$tmp/uses"

bad=0
awk -v up=" $UP " '
    index(up, " " $3 ">" $4 " ") { next }
    $1 != $2 {
        if (($1, $2) in edge) edge[$1, $2] = edge[$1, $2] "; " $3 " -> " $4
        else edge[$1, $2] = $3 " -> " $4
        mods[$1]; mods[$2]; reach[$1, $2] = 1
    }
    END {
        for (k in mods) for (a in mods) if ((a, k) in reach)
            for (b in mods) if ((k, b) in reach) reach[a, b] = 1
        bad = 0
        for (a in mods) {
            if (!((a, a) in reach) || (a in done)) continue
            bad++
            members = ""
            for (b in mods) if (((a, b) in reach && (b, a) in reach) || b == a) {
                done[b]; members = members " " b; inc[b] = bad
            }
            printf "FAIL: src: includes run back up: a circle between%s\n", members
            for (x in mods) for (y in mods)
                if ((x, y) in edge && inc[x] == bad && inc[y] == bad)
                    printf "  %s\n", edge[x, y]
        }
        exit bad ? 1 : 0
    }' "$tmp/uses" || bad=1

# The tool: no library header but the tier.
if [ -d tools ]; then
    find tools -name '*.h' > "$tmp/toolh"
    hits=$(find tools -name '*.c' -o -name '*.h' | sort | while IFS= read -r f; do
        d=$(dirname "$f")
        sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f" | while IFS= read -r h; do
            [ -f "$d/$h" ] && continue
            grep -q "/$h\$" "$tmp/toolh" && continue
            [ "$h" = smoe_tier.h ] || [ ! -f "src/$h" ] || echo "  $f: $h"
        done
    done)
    if [ -n "$hits" ]; then
        echo "FAIL: tools include library headers other than smoe_tier.h:"
        printf '%s\n' "$hits"
        bad=1
    fi
fi
[ "$bad" -eq 0 ] || exit 1
echo "ok: includes in src/ run one way (but: $UP, src/README); the tool uses smoe.h and smoe_tier.h"
