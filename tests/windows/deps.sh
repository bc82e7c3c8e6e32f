#!/bin/sh
# Build the third-party libraries the Windows cross build needs for its
# target, from Debian's source packages, into a prefix outside the tree
# (as llama.cpp's build is cached in ~/.cache/smoe-llama):
#   cmocka (the tests), json-c and zlib (the smoe tool), all static.
# xxHash needs nothing: the library compiles it in from the host's
# xxhash.h (SMOE_XXHASH_INLINE).
#
# Usage: tests/windows/deps.sh            prints the prefix on its last line
# Cache: ${SMOE_WINDOWS_CACHE:-~/.cache/smoe-windows}: src/ (the Debian
# source packages, from `apt-get source --download-only`, which needs a
# deb-src line in /etc/apt/sources.list.d), build/, prefix/. A library whose
# stamp file is there is not built again; delete prefix/ to rebuild.
set -eu
cd "$(dirname "$0")/../.."
src_tree=$(pwd)
cache=${SMOE_WINDOWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-windows}
prefix=$cache/prefix
triple=x86_64-w64-mingw32
mkdir -p "$cache/src" "$cache/build" "$prefix/lib/pkgconfig" "$prefix/include"
jobs=${SMOE_JOBS:-2}

# apt-get source needs deb-src entries: Debian 12's image has deb lines
# only. As root, add them in a file of their own (the main archive's
# bookworm suites) and update once.
deb_src() {
    grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d && return 0
    [ "$(id -u)" = 0 ] || return 1
    . /etc/os-release
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$VERSION_CODENAME" "$VERSION_CODENAME" > /etc/apt/sources.list.d/smoe-deb-src.sources
    apt-get update > "$cache/src/apt-update.log" 2>&1
}

fetch() { # package: the unpacked Debian source tree's path
    dir=$(ls -d "$cache/src/$1"-*/ 2>/dev/null | head -n 1)
    if [ -z "$dir" ]; then
        if ! ls "$cache/src/$1"_*.dsc > /dev/null 2>&1; then
            deb_src || true
            (cd "$cache/src" && apt-get source --download-only "$1" > "$cache/src/$1.log" 2>&1) || {
                echo "FAIL: apt-get source $1 (a deb-src entry is needed):" >&2
                tail -n 5 "$cache/src/$1.log" >&2
                exit 1
            }
        fi
        (cd "$cache/src" && dpkg-source --no-check -x "$1"_*.dsc > /dev/null)
        dir=$(ls -d "$cache/src/$1"-*/ | head -n 1)
    fi
    echo "${dir%/}"
}

cmake_dep() { # name source-dir cmake-args...
    name=$1
    dir=$2
    shift 2
    b=$cache/build/$name
    rm -rf "$b"
    cmake -S "$dir" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$src_tree/cmake/mingw-w64.cmake" \
        -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release "$@" > "$b.log" 2>&1 &&
        cmake --build "$b" -j"$jobs" >> "$b.log" 2>&1 &&
        cmake --install "$b" >> "$b.log" 2>&1 || {
        echo "FAIL: building $name for $triple (log: $b.log)" >&2
        tail -n 20 "$b.log" >&2
        exit 1
    }
}

if [ ! -f "$prefix/.cmocka" ]; then
    echo "building cmocka for $triple"
    cmake_dep cmocka "$(fetch cmocka)" -DCMAKE_C_FLAGS=-D__USE_MINGW_ANSI_STDIO=1 \
        -DBUILD_SHARED_LIBS=OFF -DWITH_STATIC_LIB=ON \
        -DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF -DPICKY_DEVELOPER=OFF
    # cmocka 1.1 installs its static library beside a .pc that names the
    # shared one: the test programs link the static one.
    if [ -f "$prefix/lib/libcmocka-static.a" ]; then
        cp "$prefix/lib/libcmocka-static.a" "$prefix/lib/libcmocka.a"
        rm -f "$prefix/lib/libcmocka.dll.a"
    fi
    touch "$prefix/.cmocka"
fi
if [ ! -f "$prefix/.json-c" ]; then
    echo "building json-c for $triple"
    cmake_dep json-c "$(fetch json-c)" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
        -DBUILD_TESTING=OFF -DDISABLE_WERROR=ON
    touch "$prefix/.json-c"
fi
if [ ! -f "$prefix/.zlib" ]; then
    echo "building zlib for $triple"
    d=$(fetch zlib)
    b=$cache/build/zlib
    rm -rf "$b"
    cp -R "$d" "$b"
    # Debian's source drops win32/Makefile.gcc: the library's C files,
    # compiled and archived as that makefile does.
    (cd "$b" && for c in adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback \
        inffast inflate inftrees trees uncompr zutil; do
        $triple-gcc-posix -O2 -c $c.c -o $c.o || exit 1
    done > "$b.log" 2>&1 && $triple-gcc-ar-posix rcs libz.a ./*.o >> "$b.log" 2>&1) || {
        echo "FAIL: building zlib for $triple (log: $b.log)" >&2
        exit 1
    }
    cp "$b/libz.a" "$prefix/lib/"
    cp "$b/zlib.h" "$b/zconf.h" "$prefix/include/"
    version=$(sed -n 's/^#define ZLIB_VERSION "\([^"]*\)".*/\1/p' "$b/zlib.h")
    printf 'prefix=%s\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\nName: zlib\nDescription: zlib for %s\nVersion: %s\nLibs: -L${libdir} -lz\nCflags: -I${includedir}\n' \
        "$prefix" "$triple" "$version" > "$prefix/lib/pkgconfig/zlib.pc"
    touch "$prefix/.zlib"
fi
echo "$prefix"
