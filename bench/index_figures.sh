#!/bin/sh
# Every figure of docs/packing.md, "Index vaults: time and throughput":
# index time (with and without hashes) against pack time and a plain read of
# the checkpoint; the index vault's size; cold `smoe read` and `smoe bench`
# on a real routing trace, the index vault against the packed vault of the
# same GGUF, side by side in each round (rotating which goes first).
#
# Usage (as root: it drops the page cache before every cold run):
#   bench/index_figures.sh BUILD W TRACE [ROUNDS] [TOKENS] [MEMORY]
# BUILD: a build directory (its tools/smoe/smoe); W: a folder holding
# gptoss.gguf (bench/gguf_gptoss.py writes it) with room for a packed copy;
# TRACE: gpt-oss-20b-mmlu-test.trace.gz; ROUNDS (3) of the timings and of
# bench, READS (environment, 5) rounds of smoe read, TOKENS replayed (300),
# MEMORY the ring's share for bench (1280M). With BASE (environment) set to
# another build directory, its tool reads the same index vault too
# ("idx-base"), in the same rounds: a change to the library against the
# build before it. TIMES (environment, ROUNDS) sets the timings' rounds
# alone.
# Prints one line per measurement ("what seconds ..."); assert nothing.
set -eu
smoe=$1/tools/smoe/smoe
W=$2
T=$3
R=${4:-3}
N=${5:-300}
M=${6:-1280M}
src=$W/gptoss.gguf
base=${BASE:+$BASE/tools/smoe/smoe}
# order R: the vaults of round R, each round starting one further along
order() {
    set -- packed idx ${base:+idx-base}
    k=$(( $1 % $# ))
    while [ "$k" -gt 0 ]; do v=$1; shift; set -- "$@" "$v"; k=$((k - 1)); done
    echo "$@"
}
# tool V, vault V: which smoe reads it, and its file
tool() { if [ "$1" = idx-base ]; then echo "$base"; else echo "$smoe"; fi; }
file() { if [ "$1" = idx-base ]; then echo "$W/idx.smoe"; else echo "$W/$1.smoe"; fi; }

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
for r in $(seq "${TIMES:-$R}"); do
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
    for v in $(order "$r"); do
        drop
        "$(tool "$v")" read "$(file "$v")" --order blobs --verify --json > "$W/read-$v-$r.json"
        echo "r$r read $v $(jq -c '{seconds, gb_per_s, bytes_read, payload_bytes, component_bytes}' \
            "$W/read-$v-$r.json")"
    done
done
echo "load: $(uptime)"

# smoe bench on the real trace: the library alone, cold, the same memory.
for r in $(seq "$R"); do
    for v in $(order "$r"); do
        "$(tool "$v")" bench --vault "$(file "$v")" --trace "$T" --mode smoe --memory "$M" \
            --tokens "$N" --json "$W/bench-$v-$r.json" > /dev/null
        echo "r$r bench $v $(jq -c '.modes[0] | {wait: .wait_us_per_token, hits, misses,
            bytes_read, slots, elapsed_s}' "$W/bench-$v-$r.json")"
    done
done
echo "load: $(uptime)"
