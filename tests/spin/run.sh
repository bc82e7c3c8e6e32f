#!/bin/sh
# Description: model-check the slot protocol (tests/spin/slot.pml) with spin.
#
# Every configuration of the model is checked exhaustively for safety
# (assertions and invalid end states: pan built with -DSAFETY), most of
# them also for non-progress cycles (pan built with -DNP, run with -l).
# The known-bad variants, and the earlier behaviours of the C code that
# the model found wrong, must each be rejected. Exit status: 0 when all of
# that holds, 1 when not, 77 (skipped) when spin or a C compiler is
# missing.
#
#   tests/spin/run.sh              the checks above
#   tests/spin/run.sh --extended   also larger configurations (minutes more)
#   SMOE_SPIN_KEEP=1               keep the work directory (trails)
set -u

here=$(cd "$(dirname "$0")" && pwd)
model="$here/slot.pml"
extended=0
for a in "$@"; do
    case "$a" in
    --extended) extended=1 ;;
    *) echo "usage: $0 [--extended]" >&2; exit 2 ;;
    esac
done

if ! command -v spin >/dev/null 2>&1; then
    echo "SKIP: spin is not installed (Debian package: spin)"
    exit 77
fi
cc=${CC:-gcc}
command -v "$cc" >/dev/null 2>&1 || cc=cc
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: no C compiler ($cc) to build spin's verifier"
    exit 77
fi

base=${SMOE_TEST_TMPDIR:-${TMPDIR:-/tmp}}
work=$(mktemp -d "$base/spin.XXXXXX") || exit 1
if [ "${SMOE_SPIN_KEEP:-0}" = 1 ]; then
    echo "work directory: $work"
else
    trap 'rm -rf "$work"' EXIT
fi

# pan's memory ceiling (MB) and hash table size (2^w slots). The largest
# check of the default set stores about 5 million states; with -DCOLLAPSE
# that is under 600 MB.
memlim=${SMOE_SPIN_MEMLIM:-1536}
hashw=22
if [ $extended = 1 ]; then
    memlim=${SMOE_SPIN_MEMLIM:-6144}
    hashw=24
fi

failures=0
n=0

now() { date +%s.%N 2>/dev/null || date +%s; }

# check NAME EXPECT KIND DEFINES
#   EXPECT: pass (must verify) or fail (must be rejected). KIND: safety
#   or np.
check() {
    name=$1 expect=$2 kind=$3 defs=$4
    n=$((n + 1))
    d="$work/$n-$name"
    mkdir -p "$d"
    cp "$model" "$d/slot.pml"
    t0=$(now)
    # $defs, $cflags and $args are lists of options: split on purpose
    # shellcheck disable=SC2086
    if ! (cd "$d" && spin $defs -a slot.pml >spin.log 2>&1); then
        echo "FAIL  $name: spin -a failed:"
        sed 's/^/      /' "$d/spin.log"
        failures=$((failures + 1))
        return
    fi
    if [ "$kind" = np ]; then
        cflags="-DNP" args="-l"
    else
        cflags="-DSAFETY" args=""
    fi
    # shellcheck disable=SC2086
    if ! (cd "$d" && "$cc" -O1 -w $cflags -DCOLLAPSE -DMEMLIM="$memlim" -o pan pan.c \
            >cc.log 2>&1); then
        echo "FAIL  $name: compiling pan failed:"
        sed 's/^/      /' "$d/cc.log"
        failures=$((failures + 1))
        return
    fi
    tc=$(now)
    # shellcheck disable=SC2086
    (cd "$d" && ./pan -m20000 -w$hashw $args >pan.out 2>&1)
    t1=$(now)
    out="$d/pan.out"
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | tail -n 1)
    stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | tail -n 1)
    trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$out" | tail -n 1)
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$out" | tail -n 1)
    secs=$(awk -v a="$tc" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    build=$(awk -v a="$t0" -v b="$tc" 'BEGIN { printf "%.1f", b - a }')
    what=$(grep -m1 -E '^pan:[0-9]+: ' "$out" | sed 's/^pan:[0-9]*: //; s/ (at depth.*//')
    incomplete=0
    if grep -qE 'reached -DMEMLIM|max search depth too small|out of memory' "$out"; then
        incomplete=1
    fi
    stats="states stored ${stored:-?}, transitions ${trans:-?}, depth ${depth:-?}, search ${secs}s (build ${build}s)"
    case "$expect" in
    pass)
        if [ "${errors:-1}" = 0 ] && [ $incomplete = 0 ]; then
            echo "ok    $name ($kind): verified; $stats"
        else
            echo "FAIL  $name ($kind): ${what:-search incomplete}; $stats"
            [ $incomplete = 1 ] && grep -E 'MEMLIM|too small|out of memory' "$out" | sed 's/^/      /'
            failures=$((failures + 1))
        fi
        ;;
    fail)
        if [ "${errors:-0}" != 0 ]; then
            echo "ok    $name ($kind): rejected as it must be: $what; $stats"
        else
            echo "FAIL  $name ($kind): the known-bad variant was not rejected; $stats"
            failures=$((failures + 1))
        fi
        ;;
    esac
}

echo "spin: $(spin -V 2>&1 | head -n 1)"
echo "== the model of the C code (must verify)"
for kind in safety np; do
    check "cfg1" pass "$kind" "-DCFG=1"
    [ "$kind" = safety ] && check "cfg2" pass "$kind" "-DCFG=2"
    check "cfg3" pass "$kind" "-DCFG=3"
    check "cfg4" pass "$kind" "-DCFG=4"
    if [ "$kind" = safety ]; then
        check "cfg5-worker-futex" pass "$kind" "-DCFG=5 -DWORKER_FUTEX"
    else
        check "cfg5" pass "$kind" "-DCFG=5"
    fi
    check "cfg6" pass "$kind" "-DCFG=6"
    check "cfg7-worker-futex" pass "$kind" "-DCFG=7 -DWORKER_FUTEX"
    check "cfg8" pass "$kind" "-DCFG=8"
    check "cfg9" pass "$kind" "-DCFG=9"
    check "cfg10" pass "$kind" "-DCFG=10"
done

echo "== known-bad variants (must be rejected)"
check "bad-two-step-claim" fail safety "-DCFG=4 -DBAD_TWO_STEP_CLAIM"
check "bad-fail-recycle" fail np "-DCFG=1 -DBAD_FAIL_RECYCLE"
check "bad-arm-unstarted" fail safety "-DCFG=8 -DBAD_ARM_UNSTARTED"
check "bad-untagged-chunks" fail safety "-DCFG=5 -DBAD_UNTAGGED_CHUNKS"

echo "== earlier behaviours of the C code (must be rejected)"
check "old-stop-park" fail safety "-DCFG=1 -DOLD_STOP_PARK"
check "pin-failed" fail safety "-DCFG=9 -DPIN_FAILED"
check "failed-err-once" fail safety "-DCFG=10 -DFAILED_ERR_ONCE"
check "unpin-before-err" fail np "-DCFG=9 -DUNPIN_BEFORE_ERR"

if [ $extended = 1 ]; then
    echo "== larger configurations (must verify), an earlier behaviour (must be rejected)"
    check "cfg2" pass np "-DCFG=2"
    check "old-ask-once" fail safety "-DCFG=13 -DOLD_ASK_ONCE"
    check "cfg5-worker-futex" pass np "-DCFG=5 -DWORKER_FUTEX"
    for kind in safety np; do
        check "cfg1-worker-futex" pass "$kind" "-DCFG=1 -DWORKER_FUTEX"
        check "cfg11" pass "$kind" "-DCFG=11"
        check "cfg12" pass "$kind" "-DCFG=12"
        check "cfg13" pass "$kind" "-DCFG=13"
    done
fi

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed"
    [ "${SMOE_SPIN_KEEP:-0}" = 1 ] || echo "(SMOE_SPIN_KEEP=1 keeps the trails in the work directory)"
    exit 1
fi
echo "all checks passed"
exit 0
