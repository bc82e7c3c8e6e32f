#!/bin/sh
# Install what is missing, build with warnings as errors, run the whole test
# suite. Used by CI (.ci/run) on a clean clone.
set -eu
cd "$(dirname "$0")/.."
. tests/deps.sh
smoe_install_deps
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DSMOE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure --timeout 900)
