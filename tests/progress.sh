# progress.sh - run a long step so that a terminal or a CI log shows it is
# alive. Sourced by tests/run-all.sh, tests/deps.sh, tests/macos/build.sh
# and examples/run-demo.sh.
#
# smoe_step LABEL CMD [ARG...]
#   Runs CMD (its output as usual) and, every 15 s while it runs, prints
#   "  ... LABEL: N s". Returns CMD's exit status.
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
