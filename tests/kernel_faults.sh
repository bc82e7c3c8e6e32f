#!/bin/sh
# Description: real read errors from the kernel under O_DIRECT, black box.
#
# A disk image is served by nbdkit with its error filter, exposed as a file
# through nbdfuse, attached to a loop device with direct I/O on, and holds an
# ext4 file system. The vaults are written and the file system remounted
# read-only with errors off, their metadata read once into the kernel's
# caches; then nbdkit fails SMOE_KFAULT_RATE of its data reads with EIO (the
# error filter's trigger file), which reach the library as EIO from
# pread(O_DIRECT). Two loads run meanwhile:
#   - `smoe read --hash --retries N`, again and again: each run ends with every
#     blob's hash matching, or with a definite read error; never a hang
#     (each run is under `timeout`), never a mismatch;
#   - the same without retries, until a run ends at a failed claim: its
#     message must name EIO, the file offset and the length of the read;
#   - test_stress against a vault on the faulty disk (SMOE_STRESS_VAULT):
#     100% of claims hashed, counts conserved, read errors counted.
# At least one read error must have reached the library, or the setup did not
# test anything and the script fails.
#
# Usage: tests/kernel_faults.sh [BUILD_DIR]   (default: build)
#   SMOE_KFAULT_SECONDS   seconds of each load (default 120)
#   SMOE_KFAULT_RATE      nbdkit error-pread-rate (default 10%)
#   SMOE_KFAULT_NO_INSTALL=1  do not apt-get the missing tools
# Needs root, /dev/fuse, loop devices, nbdkit, nbdfuse (libnbd-bin),
# fusermount3 (fuse3), mkfs.ext4. Exit: 0 pass, 1 fail, 77 skipped (with the
# reason on stdout).
set -eu

build=${1:-build}
secs=${SMOE_KFAULT_SECONDS:-120}
rate=${SMOE_KFAULT_RATE:-10%}
smoe=$build/tools/smoe/smoe
stress=$build/tests/test_stress

say() { echo "kernel_faults: $*"; }
skip() { say "SKIP: $*"; exit 77; }
die() { say "FAIL: $*"; exit 1; }

[ -x "$smoe" ] && [ -x "$stress" ] || die "no $smoe or $stress: build first"
[ "$(id -u)" = 0 ] || skip "needs root (loop devices and mounts)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing (no FUSE in this kernel or container)"
[ -e /dev/loop-control ] || skip "/dev/loop-control is missing (no loop devices)"

need_tools() {
    for t in nbdkit nbdfuse fusermount3 losetup mkfs.ext4 timeout; do
        command -v "$t" >/dev/null 2>&1 || return 1
    done
}
if ! need_tools && [ "${SMOE_KFAULT_NO_INSTALL:-0}" != 1 ] && command -v apt-get >/dev/null; then
    say "installing nbdkit, libnbd-bin, fuse3"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nbdkit libnbd-bin fuse3 \
        >/dev/null 2>&1 || true
fi
need_tools || skip "missing tools: needs nbdkit, nbdfuse (libnbd-bin), fusermount3 (fuse3)"

work=$(mktemp -d /tmp/smoe-kfault-XXXXXX)
loop=""
fuse_pid=""
cleanup() {
    set +e
    mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
    [ -n "$loop" ] && losetup -d "$loop"
    if [ -n "$fuse_pid" ]; then
        fusermount3 -u "$work/fuse" 2>/dev/null
        wait "$fuse_pid" 2>/dev/null
    fi
    [ -s "$work/nbdkit.pid" ] && kill "$(cat "$work/nbdkit.pid")" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$work/fuse" "$work/mnt"
truncate -s 512M "$work/disk.img"
nbdkit -U "$work/nbd.sock" -P "$work/nbdkit.pid" --filter=error file "$work/disk.img" \
    error-pread=EIO error-pread-rate="$rate" error-pread-file="$work/errors-on" ||
    skip "nbdkit would not start"
nbdfuse "$work/fuse" --unix "$work/nbd.sock" 2>"$work/nbdfuse.log" &
fuse_pid=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -e "$work/fuse/nbd" ] && break
    sleep 0.5
done
[ -e "$work/fuse/nbd" ] || skip "nbdfuse could not mount (FUSE not usable here)"
loop=$(losetup --direct-io=on --find --show "$work/fuse/nbd" 2>/dev/null) ||
    skip "cannot attach a loop device"
[ "$(losetup -n -O DIO "$loop" | tr -d ' ')" = 1 ] ||
    say "note: the loop device runs without direct I/O"
mkfs.ext4 -q -F "$loop" >/dev/null 2>&1 || skip "mkfs.ext4 on $loop failed"
mount -o noatime "$loop" "$work/mnt" || skip "cannot mount ext4 on $loop"

# Vaults: large blobs for smoe read, small ones (many chunks in flight, much
# eviction) for the stress.
"$smoe" gen --out "$work/mnt/read.smoe" --layers 4 --experts 32 --blob-bytes 200k \
    --blob-bytes-max 900k --top-k 4 >/dev/null
"$smoe" gen --out "$work/mnt/stress.smoe" --layers 4 --experts 24 --blob-bytes 16k \
    --blob-bytes-max 100k --top-k 4 --seed 7 >/dev/null
umount "$work/mnt"
mount -o ro,noload "$loop" "$work/mnt"
# Metadata into the kernel's caches while reads still succeed: errors are for
# data reads only (a failed metadata read would only break the file system).
cat "$work/mnt/read.smoe" "$work/mnt/stress.smoe" >/dev/null
ls -la "$work/mnt" >/dev/null
kernel_errors_before=$(dmesg 2>/dev/null | grep -c "I/O error, dev $(basename "$loop")" || true)
touch "$work/errors-on"
say "errors on: $rate of data reads fail with EIO (${secs}s per load)"

# ---- smoe read, again and again --------------------------------------------
runs=0 ok=0 definite=0 failed_reads=0 retries=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
    runs=$((runs + 1))
    set +e
    timeout 120 "$smoe" read "$work/mnt/read.smoe" --order blobs --hash --workers 8 \
        --retries 1000 --json >"$work/out.json" 2>"$work/err.txt"
    rc=$?
    set -e
    case $rc in
    0)
        grep -q '"hash_mismatches": *0[,}]*$' "$work/out.json" || {
            cat "$work/out.json"
            die "smoe read: wrong bytes"
        }
        ok=$((ok + 1))
        # the run's fields come first (then "runs" repeats them)
        n=$(sed -n 's/.*"reads_failed": *\([0-9]*\).*/\1/p' "$work/out.json" | head -n 1)
        failed_reads=$((failed_reads + ${n:-0}))
        n=$(sed -n 's/.*"retries": *\([0-9]*\).*/\1/p' "$work/out.json" | head -n 1)
        retries=$((retries + ${n:-0}))
        ;;
    124 | 137)
        die "smoe read did not finish in 120 s: a hang"
        ;;
    *)
        # Reading the tables at open goes through the page cache, which the
        # errors reach too: that is a definite error, not a hang.
        if grep -q -e "read failed" -e "Input/output error" "$work/err.txt"; then
            definite=$((definite + 1))
        else
            cat "$work/err.txt"
            die "smoe read failed with rc $rc"
        fi
        ;;
    esac
done
say "smoe read: $runs runs: $ok complete with every hash matching ($failed_reads failed" \
    "reads retried, $retries blobs read again), $definite ended with a definite read error"
[ "$ok" -gt 0 ] || die "no smoe read run completed"

# ---- a failed claim says why ------------------------------------------------
# Without retries a run ends at its first failed claim, whose message must
# name the errno, the file offset and the length of the failed read.
named=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
    set +e
    timeout 120 "$smoe" read "$work/mnt/read.smoe" --workers 8 >/dev/null 2>"$work/err.txt"
    rc=$?
    set -e
    case $rc in 124 | 137) die "smoe read did not finish in 120 s: a hang" ;; esac
    grep -q "claim: .*read failed" "$work/err.txt" || continue
    named=$(grep -o "read failed: EIO (Input/output error) at offset [0-9]*, [0-9]* bytes" \
        "$work/err.txt" | head -n 1)
    [ -n "$named" ] || { cat "$work/err.txt"; die "a failed claim's message lacks the errno, offset or length"; }
    say "a failed claim says: $named"
    break
done
[ -n "$named" ] || say "note: no run without retries ended at a failed claim"

# ---- stress replay ---------------------------------------------------------
set +e
SMOE_STRESS_VAULT="$work/mnt/stress.smoe" SMOE_STRESS_SECONDS="$secs" \
    SMOE_TEST_TMPDIR="$work" timeout $((secs * 2 + 120)) "$stress" >"$work/stress.txt" 2>&1
rc=$?
set -e
grep -E "^stress[,:]" "$work/stress.txt" | sed 's/^/kernel_faults: /'
case $rc in
0) ;;
124 | 137) die "test_stress did not finish: a hang" ;;
*) cat "$work/stress.txt"; die "test_stress failed (rc $rc)" ;;
esac
# One line per stress run (one per eviction policy): add them up.
stress_failed=$(sed -n 's/.*chunks, \([0-9]*\) failed).*/\1/p' "$work/stress.txt" |
    awk '{ n += $1 } END { print n + 0 }')

kernel_errors=$(dmesg 2>/dev/null | grep -c "I/O error, dev $(basename "$loop")" || true)
say "kernel logged $((kernel_errors - kernel_errors_before)) read errors on $(basename "$loop")" \
    "(rate-limited)"
[ $((failed_reads + definite + ${stress_failed:-0})) -gt 0 ] ||
    die "no read error reached the library: the fault setup did not work"
say "PASS"
