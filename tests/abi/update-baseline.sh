#!/bin/sh
# Regenerate the ABI baseline tests/abi/libsmoe_stream.so.<major>.abi from
# the tree as it is: build the shared library with debug info in
# build/abi-baseline, then write its abidw description (check_abi.sh
# --update). Run it when a release's interface is final (docs/abi.md), and
# commit the file with the release.
#
# Usage: tests/abi/update-baseline.sh [cmake options...]
set -eu
cd "$(dirname "$0")/../.."
b=build/abi-baseline
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_BUILD_TESTS=OFF \
    -DSMOE_BUILD_TOOL=OFF -DSMOE_BUILD_EXAMPLES=OFF "$@" > /dev/null
cmake --build "$b" --target smoe_stream -j"$(nproc 2>/dev/null || echo 2)"
lib=$(ls "$b"/src/libsmoe_stream.so.*.*.* | head -n 1)
exec sh tests/abi/check_abi.sh --update "$lib" .
