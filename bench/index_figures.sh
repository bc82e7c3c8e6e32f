#!/bin/sh
# Every figure of docs/packing.md, "Index vaults: time and throughput":
# index time (with and without hashes) against pack time and a plain read of
# the checkpoint; the index vault's size; cold `smoe read` and `smoe bench`
# on a real routing trace, the index vault against the packed vault of the
# same GGUF, side by side in each round (alternating which goes first).
#
# Usage (as root: it drops the page cache before every cold run):
#   bench/index_figures.sh BUILD W TRACE [ROUNDS] [TOKENS] [MEMORY]
# BUILD: a build directory (its tools/smoe/smoe); W: a folder holding
# gptoss.gguf (bench/gguf_gptoss.py writes it) with room for a packed copy;
# TRACE: gpt-oss-20b-mmlu-test.trace.gz; ROUNDS (3) of the timings and of
# bench, READS (environment, 5) rounds of smoe read, TOKENS replayed (300),
# MEMORY the ring's share for bench (1280M).
# Prints one line per measurement ("what seconds ..."); assert nothing.
set -eu
smoe=$1/tools/smoe/smoe
W=$2
T=$3
R=${4:-3}
N=${5:-300}
M=${6:-1280M}
src=$W/gptoss.gguf

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
# timed LABEL CMD...: cold, the command's wall time
timed() {
    label=$1
    shift
    drop
    t0=$(now)
    "$@" > /dev/null
    t1=$(now)
    echo "$label $(echo "$t1 - $t0" | bc)"
}

echo "load: $(uptime)"
echo "source: $(stat -c %s "$src") bytes"
for r in $(seq "$R"); do
    timed "r$r cat" sh -c "cat '$src' > /dev/null"
    timed "r$r index" "$smoe" index "$src" --out "$W/idx.smoe" --quiet
    timed "r$r index-no-hash" "$smoe" index "$src" --out "$W/idx-nohash.smoe" --no-hash --quiet
    timed "r$r pack" "$smoe" pack "$src" --out "$W/packed.smoe" --quiet
done
echo "sizes: index $(stat -c %s "$W/idx.smoe") packed $(stat -c %s "$W/packed.smoe")" \
    "scout $(stat -c %s "$W/packed.scout") source $(stat -c %s "$src")"
echo "load: $(uptime)"

# Cold smoe read: every blob once, file order, verification on.
for r in $(seq "${READS:-5}"); do
    if [ $((r % 2)) = 1 ]; then order="packed idx"; else order="idx packed"; fi
    for v in $order; do
        drop
        "$smoe" read "$W/$v.smoe" --order blobs --verify --json > "$W/read-$v-$r.json"
        echo "r$r read $v $(jq -c '{seconds, gb_per_s, bytes_read, payload_bytes, component_bytes}' \
            "$W/read-$v-$r.json")"
    done
done
echo "load: $(uptime)"

# smoe bench on the real trace: the library alone, cold, the same memory.
for r in $(seq "$R"); do
    if [ $((r % 2)) = 1 ]; then order="packed idx"; else order="idx packed"; fi
    for v in $order; do
        "$smoe" bench --vault "$W/$v.smoe" --trace "$T" --mode smoe --memory "$M" \
            --tokens "$N" --json "$W/bench-$v-$r.json" > /dev/null
        echo "r$r bench $v $(jq -c '.modes[0] | {wait: .wait_us_per_token, hits, misses,
            bytes_read, slots, elapsed_s}' "$W/bench-$v-$r.json")"
    done
done
echo "load: $(uptime)"
