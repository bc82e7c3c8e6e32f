#!/bin/sh
# Install a build into a temporary prefix and use it as an engine would:
#  - tests/abi/consumer.c (C11) and consumer.cpp (C++17), each including
#    smoe.h twice, built with -Wall -Wextra -Wpedantic -Werror and run,
#    once through pkg-config (shared, and static with Requires.private) and
#    once through a CMake project using find_package(smoe_stream 1.0)
#    (targets smoe::smoe_stream and smoe::smoe_stream_static);
#  - examples/quickstart.c (README's "Use") built through pkg-config with
#    the same warnings, and run on a vault the installed smoe generates;
#  - find_package(smoe_stream 2.0) must fail (SameMajorVersion);
#  - a shared consumer needs libsmoe_stream.so.<major> and not libxxhash;
#  - nm -D: the installed library defines only smoe_* symbols, each with
#    its version node (smoe_open@@SMOE_1.0).
#
# Usage: check_install.sh BUILD_DIR SOURCE_DIR   (ctest: abi_install)
set -eu
build=$1
src=$(cd "$2" && pwd)
cc=${CC:-cc}
cxx=${CXX:-c++}
for t in "$cc" "$cxx" pkg-config nm; do
    command -v "$t" > /dev/null 2>&1 || { echo "SKIP: $t not found"; exit 77; }
done
tmp=$(mktemp -d "${SMOE_TEST_TMPDIR:-/tmp}/install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix
status=0
ok() { echo "  ok: $*"; }
fail() {
    echo "  FAIL: $*"
    status=1
}
run() { # what command...: run, show its output on failure
    what=$1
    shift
    if "$@" > "$tmp/out" 2>&1; then
        ok "$what"
    else
        fail "$what"
        sed 's/^/    /' "$tmp/out"
    fi
}

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$prefix" -name smoe_stream.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no smoe_stream.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
so=$(ls "$libdir"/libsmoe_stream.so.[0-9]* 2>/dev/null | head -n 1)
(cd "$prefix" && find . -type f -o -type l | sort | sed 's|^\./|  |')

echo "== pkg-config"
export PKG_CONFIG_PATH="$(dirname "$pc")"
cflags=$(pkg-config --cflags smoe_stream)
libs=$(pkg-config --libs smoe_stream)
echo "  pkg-config --cflags --libs smoe_stream: $cflags $libs"
echo "  pkg-config --static --libs smoe_stream: $(pkg-config --static --libs smoe_stream)"
warn="-Wall -Wextra -Wpedantic -Werror"
run "C11 consumer built" $cc -std=c11 $warn $cflags "$src/tests/abi/consumer.c" $libs \
    -o "$tmp/c_pc"
run "C11 consumer runs" env LD_LIBRARY_PATH="$libdir" "$tmp/c_pc" "$tmp"
run "C++17 consumer built" $cxx -std=c++17 $warn $cflags "$src/tests/abi/consumer.cpp" $libs \
    -o "$tmp/cxx_pc"
run "C++17 consumer runs" env LD_LIBRARY_PATH="$libdir" "$tmp/cxx_pc"
needed=$(readelf -d "$tmp/c_pc" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
*" libsmoe_stream.so."[0-9]*) ok "shared consumer needs: $needed" ;;
*) fail "shared consumer does not need libsmoe_stream.so.N: $needed" ;;
esac
case " $needed" in
*xxhash*) fail "xxHash leaks to a shared consumer: $needed" ;;
esac
# README's program, built as its first lines say (with -Wpedantic besides),
# run on a vault from the installed smoe where the build has the tool.
run "examples/quickstart.c built through pkg-config" $cc $warn \
    "$src/examples/quickstart.c" $cflags $libs -o "$tmp/quickstart"
if [ -x "$prefix/bin/smoe" ]; then
    run "installed smoe gen" "$prefix/bin/smoe" gen --out "$tmp/q.smoe" --layers 2 \
        --experts 4 --blob-bytes 64K --top-k 2
    run "quickstart runs" env LD_LIBRARY_PATH="$libdir" "$tmp/quickstart" "$tmp/q.smoe"
fi
static_libs=$(pkg-config --static --libs smoe_stream | sed "s|-lsmoe_stream|$libdir/libsmoe_stream.a|")
run "C11 consumer built with the static library (Requires.private)" $cc -std=c11 $warn \
    $cflags "$src/tests/abi/consumer.c" $static_libs -o "$tmp/c_static"
run "static consumer runs" "$tmp/c_static" "$tmp"

echo "== find_package"
cp -R "$src/tests/abi/consumer" "$tmp/consumer"
cp "$src/tests/abi/consumer.c" "$src/tests/abi/consumer.cpp" "$tmp/"
run "configure with find_package(smoe_stream 1.0)" cmake -S "$tmp/consumer" -B "$tmp/cb" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx"
run "build C, C++ and static consumers" cmake --build "$tmp/cb"
for e in consumer_c consumer_static; do
    run "$e runs" "$tmp/cb/$e" "$tmp"
done
run "consumer_cxx runs" "$tmp/cb/consumer_cxx"
if cmake -S "$tmp/consumer" -B "$tmp/cb2" -DCMAKE_PREFIX_PATH="$prefix" \
    -DSMOE_WANT_VERSION=2.0 > "$tmp/out" 2>&1; then
    fail "find_package(smoe_stream 2.0) accepted a 1.x package"
else
    ok "find_package(smoe_stream 2.0) refuses a 1.x package"
fi

echo "== nm -D --defined-only $(basename "$so")"
nm -D --defined-only "$so" > "$tmp/nm"
awk '{ print "  " $0 }' "$tmp/nm"
bad=$(awk '$2 != "A" && $3 !~ /^smoe_[a-z0-9_]+@@SMOE_[0-9]+\.[0-9]+$/ { print $3 }' "$tmp/nm")
if [ -n "$bad" ]; then
    fail "symbols other than smoe_*@@SMOE_X.Y: $bad"
else
    ok "$(awk '$2 != "A"' "$tmp/nm" | wc -l) symbols, all smoe_* with a version"
fi

if [ "$status" -ne 0 ]; then
    echo "installed package: FAILED"
    exit 1
fi
echo "installed package: pkg-config and find_package consumers (C11, C++17, static) ok"
