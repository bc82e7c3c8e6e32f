#!/bin/sh
# bench_read.sh - cold sequential throughput of the warm-up (`smoe read
# --order shares`: smoe_warmup over a ring that holds the vault, each worker
# reading its own contiguous share) against fio psync with the same job
# count and block size, alternating in one run so that a noisy machine
# affects both alike; with the blob-order figure (`smoe read --order
# blobs`: prefetch, claim, release in file order, what decode sees). Needs
# root (to drop the page cache) and fio.
#
# Usage: bench/bench_read.sh SMOE VAULT [workers...]   (default workers: 1 4 16)
#   ROUNDS=n   rounds per setting (default 3); the median of each is reported
#   PEER=path  bench/pread_peer (default: beside SMOE's build, build/bench/)
#
# fio reads every request of a job into the same buffer. A warm-up cannot:
# each blob goes to its own slot. On a virtual machine that costs: a DMA
# into memory the host touched last long ago is slower than into one hot
# buffer. So beside fio runs pread_peer: the same jobs, block size and
# direct pread, each request into its own place of a populated buffer as
# large as the shares (transparent huge pages, as the ring): the disk's
# speed into fresh memory, what any loader of a ring can reach.
#
# For each worker count prints the median GB/s of fio psync (one job per
# worker, each job reading its own contiguous share of the vault in
# requests of one blob: the classic command), of pread_peer into fresh
# memory, of the warm-up with verification off and on, and of blob order
# (verification off); then the medians of the per-round ratios (paired, so
# a slow minute of the shared disk cancels out): the warm-up to fio, the
# warm-up off and on to pread_peer, verification on to off (its cost), and
# blob order to fio. Every run starts with the page cache dropped.
set -eu
smoe=$1
vault=$2
shift 2
workers=${*:-1 4 16}
rounds=${ROUNDS:-3}
command -v fio >/dev/null || { echo "bench_read: fio is not installed" >&2; exit 77; }
peer=${PEER:-$(dirname "$(dirname "$(dirname "$smoe")")")/bench/pread_peer}
[ -x "$peer" ] || { echo "bench_read: no $peer (build the bench target pread_peer, or set PEER)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench_read: needs root to drop caches" >&2; exit 77; }

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# Direct reads pin the destination pages for each request, and on this kind
# of virtual machine that costs more than the transfer when the pages are
# 4 KiB: the ring asks for transparent huge pages for that reason. To compare
# against the disk rather than against page pinning, fio's buffers come from
# hugetlbfs (2 MiB pages) when this script can mount it and reserve them,
# else from transparent huge pages set to "always" for fio's runs. Every
# setting is put back on exit.
thp=/sys/kernel/mm/transparent_hugepage/enabled
thp_old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp" 2>/dev/null || true)
hp_nr=/proc/sys/vm/nr_hugepages
hp_old=$(cat "$hp_nr" 2>/dev/null || echo 0)
huge=$(mktemp -d)
fio_mem=""
cleanup() {
    [ -n "$fio_mem" ] && umount "$huge" 2>/dev/null
    [ -w "$hp_nr" ] && echo "$hp_old" > "$hp_nr"
    [ -w "$thp" ] && [ -n "$thp_old" ] && echo "$thp_old" > "$thp"
    rmdir "$huge" 2>/dev/null || true
}
trap cleanup EXIT
fio_thp() {
    if [ -n "$fio_mem" ]; then
        # shellcheck disable=SC2086
        fio $fio_mem "$@"
    else
        [ -w "$thp" ] && echo always > "$thp"
        fio "$@"
        [ -w "$thp" ] && [ -n "$thp_old" ] && echo "$thp_old" > "$thp"
    fi
    return 0
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Blob size and data extent from the vault itself.
info=$("$smoe" inspect "$vault" --json)
blob=$(printf '%s' "$info" | sed -n 's/.*"max_padded": *\([0-9]*\).*/\1/p' | head -n1)
[ -n "$blob" ] || { echo "bench_read: cannot read max_padded from smoe inspect" >&2; exit 1; }
data=$(printf '%s' "$info" | sed -n 's/.*"total_padded": *\([0-9]*\).*/\1/p' | head -n1)

maxw=1
for w in $workers; do [ "$w" -gt "$maxw" ] && maxw=$w; done
# Buffers: one blob per job (psync) or per queue entry (libaio), 2 MiB pages.
want=$((hp_old + 2 * maxw * (blob / 2097152 + 1) + 16))
if [ -w "$hp_nr" ] && mount -t hugetlbfs none "$huge" 2>/dev/null; then
    echo "$want" > "$hp_nr"
    fio_mem="--iomem=mmaphuge:$huge/fiobuf --hugepage-size=2M"
fi

echo "vault $vault: $data bytes of blobs, blob $blob bytes; $rounds rounds, caches dropped before each run"
if [ -n "$fio_mem" ]; then
    echo "fio buffers: hugetlbfs 2 MiB pages; the ring: transparent huge pages (madvise)"
else
    echo "fio buffers: transparent huge pages 'always' (was '$thp_old'); the ring: madvise"
fi
gbs() { sed -n 's/.*"gb_per_s": *\([0-9.e+-]*\).*/\1/p' | head -n1; }
printf '%7s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n' workers fio_psync fresh warm_off \
    warm_on blobs off/fio off/fresh on/fresh on/off blobs/fio
for w in $workers; do
    per=$((data / w / blob * blob))
    f=""; p=""; n=""; v=""; b=""; rn=""; rp=""; rq=""; ro=""; rb=""
    for r in $(seq "$rounds"); do
        drop
        fr="$(fio_thp --name=r --filename="$vault" --rw=read --bs="$blob" --direct=1 \
            --ioengine=psync --numjobs="$w" --size="$per" --offset=16384 \
            --offset_increment="$per" --group_reporting --output-format=terse --terse-version=3 |
            awk -F';' '{print $7 * 1024 / 1e9}')"
        drop
        pr="$("$peer" "$vault" "$w" "$blob" 16384 "$data" | gbs)"
        drop
        nr="$("$smoe" read "$vault" --order shares --workers "$w" --no-verify --json | gbs)"
        drop
        vr="$("$smoe" read "$vault" --order shares --workers "$w" --verify --json | gbs)"
        drop
        br="$("$smoe" read "$vault" --order blobs --workers "$w" --no-verify --json | gbs)"
        f="$f $fr"; p="$p $pr"; n="$n $nr"; v="$v $vr"; b="$b $br"
        rn="$rn $(echo "$nr / $fr" | bc -l)"
        rp="$rp $(echo "$nr / $pr" | bc -l)"
        rq="$rq $(echo "$vr / $pr" | bc -l)"
        ro="$ro $(echo "$vr / $nr" | bc -l)"
        rb="$rb $(echo "$br / $fr" | bc -l)"
    done
    med() { echo "$@" | tr ' ' '\n' | median; }
    # shellcheck disable=SC2086
    printf '%7s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n' "$w" \
        "$(med $f)" "$(med $p)" "$(med $n)" "$(med $v)" "$(med $b)" "$(med $rn)" "$(med $rp)" \
        "$(med $rq)" "$(med $ro)" "$(med $rb)"
done
