#!/bin/sh
# Install what is missing, build with warnings as errors, cross-compile for
# macOS, run the whole test suite (ABI checks included: ctest -L abi). Used
# by CI (.ci/run) on a clean clone.
set -eu
cd "$(dirname "$0")/.."
. tests/deps.sh
# abigail-tools: abidw/abidiff (tests/abi/check_abi.sh); file, llvm, lld:
# reading and relinking the Mach-O files of the macOS cross build.
smoe_install_deps abigail-tools file llvm lld spin
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DSMOE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
# The macOS build: zig from the npm registry, compiled and linked, not run
# (docs/portability.md). Says SKIP when zig cannot be had.
tests/macos/build.sh build/macos
(cd build && ctest --output-on-failure --timeout 900)
