#!/bin/sh
# Install the Debian packages the build, the tests and the demo need, if any
# are missing. Sourced by tests/run-all.sh and examples/run-demo.sh (which
# also source tests/progress.sh).
smoe_install_deps() {
    need="build-essential cmake pkg-config libxxhash-dev libcmocka-dev libjson-c-dev zlib1g-dev $*"
    missing=""
    for p in $need; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    echo "installing:$missing (apt-get: 2 to 9 minutes on a fresh machine)"
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    # shellcheck disable=SC2086
    if ! smoe_step "installing packages" sh -c \
        "{ apt-get update -qq && apt-get install -y -qq $missing; } > '$log' 2>&1"; then
        echo "FAIL: apt-get could not install:$missing"
        grep -v '^$' "$log" | head -n 8 | sed 's/^/  /'
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}
