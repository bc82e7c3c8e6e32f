#!/bin/sh
# Description: no function of the C files under the given folders is longer
# than the limit.
#
# A function's length is the lines from its opening brace to its closing
# one, both included, as the house style sets them: each alone in column 0.
# Longer functions are cut into named steps (README.md, "Layout").
#
# Usage: check_function_length.sh LIMIT DIR...
set -eu
[ $# -ge 2 ] || { echo "usage: $0 LIMIT DIR..." >&2; exit 2; }
limit=$1
shift
files=$(find "$@" -name '*.c' -type f | sort)
[ -n "$files" ] || { echo "FAIL: no C files in $*"; exit 1; }
# shellcheck disable=SC2086
awk -v limit="$limit" '
    FNR == 1 { start = 0; sig = "" }
    /^\{/ { start = FNR; name = sig }
    /^\}/ && start {
        n = FNR - start + 1
        if (n > max) max = n
        if (n > limit) { printf "  %s:%d: %d lines: %s\n", FILENAME, start, n, name; bad++ }
        start = 0
    }
    /^[A-Za-z_].*\(/ { sig = $0 }
    END {
        if (bad) { printf "FAIL: %d functions over %d lines (above)\n", bad, limit; exit 1 }
        printf "ok: no function over %d lines (the longest: %d)\n", limit, max
    }' $files
