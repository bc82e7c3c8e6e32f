# progress.sh - run a long step so that a terminal or a CI log shows it is
# alive. Sourced by tests/run-all.sh, tests/deps.sh, tests/macos/build.sh
# and examples/run-demo.sh.
#
# smoe_step LABEL CMD [ARG...]
#   Runs CMD (its output as usual) and, every 15 s while it runs, prints
#   "  ... LABEL: N s". Returns CMD's exit status.
#
# smoe_logged_step LABEL LOG CMD [ARG...]
#   smoe_step with CMD's output kept in LOG instead (a third-party build's
#   thousands of warning lines). Then prints one line: the log's last line
#   and its count of compiler warnings; on failure, the log's error lines
#   (40 at most) and its last 20 lines. Returns CMD's exit status.
smoe_step() {
    _smoe_label=$1
    shift
    _smoe_t0=$(date +%s)
    "$@" &
    _smoe_pid=$!
    (
        n=0
        while kill -0 "$_smoe_pid" 2>/dev/null; do
            sleep 1
            n=$((n + 1))
            if [ $((n % 15)) = 0 ] && kill -0 "$_smoe_pid" 2>/dev/null; then
                echo "  ... $_smoe_label: $(($(date +%s) - _smoe_t0)) s"
            fi
        done
    ) &
    _smoe_ticker=$!
    _smoe_rc=0
    wait "$_smoe_pid" || _smoe_rc=$?
    wait "$_smoe_ticker" 2>/dev/null || true
    return "$_smoe_rc"
}

smoe_logged_step() {
    _smoe_llabel=$1 _smoe_log=$2
    shift 2
    mkdir -p "$(dirname "$_smoe_log")"
    _smoe_lrc=0
    smoe_step "$_smoe_llabel (output in $_smoe_log)" sh -c '"$@" > "$0" 2>&1' \
        "$_smoe_log" "$@" || _smoe_lrc=$?
    _smoe_warn=$(grep -c 'warning:' "$_smoe_log" || true)
    if [ "$_smoe_lrc" = 0 ]; then
        echo "$_smoe_llabel: $(tail -n 1 "$_smoe_log");" \
            "$_smoe_warn compiler warnings (in $_smoe_log)"
        return 0
    fi
    echo "FAIL: $_smoe_llabel (exit $_smoe_lrc); its errors, from $_smoe_log:"
    grep -E 'error:|Error [0-9]|fatal|undefined reference' "$_smoe_log" | head -n 40 |
        sed 's/^/  /'
    echo "the last lines of $_smoe_log:"
    tail -n 20 "$_smoe_log" | sed 's/^/  /'
    return "$_smoe_lrc"
}
