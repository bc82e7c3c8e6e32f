#!/bin/sh
# Install the Debian packages the build, the tests and the demo need, if any
# are missing. Sourced by tests/run-all.sh and examples/run-demo.sh.
smoe_install_deps() {
    need="build-essential cmake pkg-config libxxhash-dev libcmocka-dev libjson-c-dev zlib1g-dev $*"
    missing=""
    for p in $need; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq $missing >/dev/null
    fi
}
