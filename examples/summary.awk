# summary.awk: the last words of examples/run-demo.sh. Reads what
# decode_loop and smoe bench printed and says what their figures mean.
# Usage: awk -f summary.awk DECODE_OUTPUT BENCH_OUTPUT
FNR == 1 { file++ }
file == 1 && /^decode_loop: .* tokens\/s$/ { tps = $(NF - 1) }
file == 1 && /^  hit rate / { hit = $3 }
file == 1 && /^  read / { total = $2; warm = $11; other = $16 }
file == 1 && /^  warm-up: / { rate = $12 }
file == 1 && /^  waiting in claim: / { wait = $(NF - 3) }
file == 2 && /^memory / { mem = $2 " " $3; share = substr($4, 2) }
file == 2 && /^(smoe|pagecache|mmap|direct) / && NF >= 12 { w[$1] = $3; lim[$1] = $NF }
function vs(mode, name) {
    if (!(mode in w) || w["smoe"] <= 0)
        return ""
    r = w[mode] / w["smoe"]
    return sprintf("%s %s ms (%.2fx as long)", name, w[mode], r)
}
END {
    if (tps != "" && hit >= 0.9)
        printf "decode_loop: %s tokens/s with %s of claims served from the ring, waiting " \
               "%s ms a token: the warm-up read %s of the %s MiB at start-up (%s GB/s, " \
               "sequential reads), and decoding itself read only %s MiB, so its pace is " \
               "that of the dot products over every byte, not the drive's.\n",
               tps, hit, wait, warm, total, rate, other
    else if (tps != "")
        printf "decode_loop: %s tokens/s with only %s of claims served from the ring (it " \
               "holds less than the vault here, or the warm-up had not filled it), waiting " \
               "%s ms a token: decoding read %s MiB, on demand and by pre-warm, beside the " \
               "warm-up's %s MiB.\n",
               tps, hit, wait, other, warm
    if (!("smoe" in w)) {
        print "smoe bench: no result to compare (see its output above)."
        exit
    }
    if (lim["pagecache"] == "cgroup")
        fair = "the page cache and mmap were held to the same memory by a cgroup, " \
               "with the page cache dropped before each mode"
    else
        fair = "but the page cache and mmap could use all free memory and the vault's " \
               "pages earlier runs left cached (not root, or SMOE_DEMO_NO_ROOT_STEPS=1), " \
               "so theirs are not equal-memory figures"
    printf "smoe bench: with %s of memory (%s of the vault) the ring waited %s ms per " \
           "token on the routing trace, against %s, %s and %s; %s.\n",
           mem, share, w["smoe"], vs("direct", "direct reads"), vs("mmap", "mmap"),
           vs("pagecache", "the page cache"), fair
}
