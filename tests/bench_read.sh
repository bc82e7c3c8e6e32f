#!/bin/sh
# bench_read.sh - cold sequential throughput of `smoe read` against fio on the
# same vault, alternating in one run so that a noisy machine affects both
# alike. Needs root (to drop the page cache) and fio.
#
# Usage: tests/bench_read.sh SMOE VAULT [workers...]   (default workers: 1 4 16)
#   ROUNDS=n   rounds per setting (default 3); the median of each is reported
#
# For each worker count prints the median GB/s of fio and of `smoe read` with
# verification off and on, and the median of the per-round ratios to the fio
# run just before (paired, so a slow minute of the shared disk cancels out).
set -eu
smoe=$1
vault=$2
shift 2
workers=${*:-1 4 16}
rounds=${ROUNDS:-3}
command -v fio >/dev/null || { echo "bench_read: fio is not installed" >&2; exit 77; }
[ "$(id -u)" = 0 ] || { echo "bench_read: needs root to drop caches" >&2; exit 77; }

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Blob size and data extent from the vault itself.
info=$("$smoe" inspect "$vault" --json)
blob=$(printf '%s' "$info" | sed -n 's/.*"max_padded": *\([0-9]*\).*/\1/p' | head -n1)
[ -n "$blob" ] || { echo "bench_read: cannot read max_padded from smoe inspect" >&2; exit 1; }
data=$(printf '%s' "$info" | sed -n 's/.*"total_padded": *\([0-9]*\).*/\1/p' | head -n1)

echo "vault $vault: $data bytes of blobs, blob $blob bytes; $rounds rounds, caches dropped before each run"
printf '%8s %10s %14s %14s %10s %10s\n' workers fio_GB/s smoe_noverify smoe_verify ratio_off ratio_on
for w in $workers; do
    per=$((data / w / blob * blob))
    f=""; n=""; v=""; rn=""; rv=""
    for r in $(seq "$rounds"); do
        drop
        fr="$(fio --name=r --filename="$vault" --rw=read --bs="$blob" --direct=1 \
            --ioengine=psync --numjobs="$w" --size="$per" --offset=16384 \
            --offset_increment="$per" --group_reporting --output-format=terse --terse-version=3 |
            awk -F';' '{print $7 * 1024 / 1e9}')"
        drop
        nr="$("$smoe" read "$vault" --workers "$w" --no-verify --json |
            sed -n 's/.*"gb_per_s": *\([0-9.e+-]*\).*/\1/p')"
        drop
        vr="$("$smoe" read "$vault" --workers "$w" --verify --json |
            sed -n 's/.*"gb_per_s": *\([0-9.e+-]*\).*/\1/p')"
        f="$f $fr"; n="$n $nr"; v="$v $vr"
        rn="$rn $(echo "$nr / $fr" | bc -l)"
        rv="$rv $(echo "$vr / $fr" | bc -l)"
    done
    fm=$(echo $f | tr ' ' '\n' | median)
    nm=$(echo $n | tr ' ' '\n' | median)
    vm=$(echo $v | tr ' ' '\n' | median)
    printf '%8s %10.3f %14.3f %14.3f %10.3f %10.3f\n' "$w" "$fm" "$nm" "$vm" \
        "$(echo $rn | tr ' ' '\n' | median)" "$(echo $rv | tr ' ' '\n' | median)"
done
