#!/bin/sh
# Cross-compile the library and the test suite for 64-bit Windows with
# Debian's MinGW-w64 (cmake/mingw-w64.cmake), warnings as errors, check what
# came out, and run the tests under Debian's Wine:
#  - cmocka, json-c and zlib for the target from Debian's source packages
#    (tests/windows/deps.sh), cached in ~/.cache/smoe-windows;
#  - `file`: a PE32+ DLL smoe_stream-<ABI major>.dll, its import library
#    libsmoe_stream.dll.a, the static library, the smoe tool (smoe.exe), the
#    test programs;
#  - the DLL's export table: exactly the functions of src/smoe_stream.map
#    (ctest abi_exports_dll, tests/windows/check_exports.sh);
#  - the DLL imports Windows' own DLLs only (the GCC runtime and
#    winpthreads linked in), and the calls the platform layer is built on
#    (ReadFile, WaitOnAddress, MoveFileExW, VirtualAlloc, ...);
#  - the installed package: smoe_stream.pc for the target, a program built
#    from it against the DLL and against the static library;
#  - smoe.exe under Wine on the trained fixture (tests/fixtures/trained):
#    pack, index, inspect, verify, trace-gen and bench;
#  - every test program under wine (a prefix kept in the cache: its first
#    start takes 10 to 30 s), with ctest, the tool's tests included; what a
#    test cannot check under Windows it reports as skipped
#    (docs/portability.md lists them).
# Wine runs the programs on the Linux file system beneath it: no figure of
# speed comes from here.
#
# Usage: tests/windows/build.sh [BUILD_DIR]      (default: build/windows)
# Where MinGW-w64 or Wine is missing the script says SKIP and why, and
# exits 0; with SMOE_REQUIRE_WINDOWS=1 it says FAIL and exits 1.
set -eu
cd "$(dirname "$0")/../.."
src=$(pwd)
b=${1:-build/windows}
mkdir -p "$b"
b=$(cd "$b" && pwd)
jobs=${SMOE_JOBS:-$(nproc 2>/dev/null || echo 2)}
cache=${SMOE_WINDOWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-windows}
triple=x86_64-w64-mingw32

skip() {
    if [ "${SMOE_REQUIRE_WINDOWS:-0}" = 1 ]; then
        echo "FAIL: Windows cross build (required: SMOE_REQUIRE_WINDOWS=1): $*"
        exit 1
    fi
    echo "SKIP: Windows cross build: $*"
    exit 0
}
fail() {
    echo "FAIL: Windows cross build: $*"
    exit 1
}
command -v $triple-gcc-posix > /dev/null 2>&1 ||
    skip "$triple-gcc-posix not found (Debian package gcc-mingw-w64-x86-64)"
WINE=$(command -v wine64 || command -v wine || true)
[ -x /usr/lib/wine/wine64 ] && WINE=/usr/lib/wine/wine64
[ -n "$WINE" ] || skip "wine not found (Debian packages wine64 and wine)"
command -v dpkg-source > /dev/null 2>&1 || skip "dpkg-source not found (Debian package dpkg-dev)"

status=0
check() { # what command...
    what=$1
    shift
    if "$@"; then
        echo "  ok: $what"
    else
        echo "  FAIL: $what"
        status=1
    fi
}
has() { printf '%s\n' "$1" | grep -q -- "$2"; }

# ---- third-party libraries for the target --------------------------------
start=$(date +%s)
prefix=$(SMOE_WINDOWS_CACHE=$cache sh tests/windows/deps.sh | tail -n 1)
[ -d "$prefix" ] || fail "tests/windows/deps.sh"

# ---- build -----------------------------------------------------------------
echo "== configure and build in $b"
PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig PKG_CONFIG_PATH= \
    cmake -S "$src" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/mingw-w64.cmake" \
    -DCMAKE_FIND_ROOT_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_WERROR=ON \
    -DSMOE_BUILD_TESTS=ON -DSMOE_BUILD_TOOL=ON -DSMOE_BUILD_EXAMPLES=OFF \
    -DCMAKE_INSTALL_PREFIX="$b/install" \
    > "$b.configure.log" 2>&1 || { tail -n 30 "$b.configure.log"; fail "configure"; }
cmake --build "$b" -j"$jobs" > "$b.build.log" 2>&1 ||
    { grep -E "error|warning" "$b.build.log" | head -n 40; fail "build"; }
echo "  built in $(($(date +%s) - start)) s (third-party libraries included)"

abi_major=$(sed -n 's/^set(SMOE_ABI_MAJOR \([0-9]*\)).*/\1/p' CMakeLists.txt)
dll=$b/src/smoe_stream-$abi_major.dll
check "file: $(file -b "$dll" | cut -c1-60)" has "$(file -b "$dll")" "PE32+ executable (DLL).*x86-64"
check "import library src/libsmoe_stream.dll.a" test -f "$b/src/libsmoe_stream.dll.a"
check "static library src/libsmoe_stream.a" test -f "$b/src/libsmoe_stream.a"
exe=$b/tools/smoe/smoe.exe
check "file: tools/smoe/smoe.exe: $(file -b "$exe" | cut -c1-40)" has "$(file -b "$exe")" \
    "PE32+ executable (console) x86-64"
windows_dlls_only() { # file
    dlls=$($triple-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: //p' | tr 'A-Z' 'a-z' | sort)
    check "$(basename "$1") imports Windows' DLLs only: $(echo $dlls)" sh -c \
        "! printf '%s\n' '$dlls' | grep -v -E '^(kernel32|advapi32|msvcrt|api-ms-win-core-synch-l1-2-0)\.dll$'"
}
windows_dlls_only "$dll"
windows_dlls_only "$exe"
imports=$($triple-objdump -p "$dll" | awk '/DLL Name:/ { in_dll = 1 } in_dll && NF >= 3 { print $NF }')
for f in CreateFileW ReadFile WriteFile MoveFileExW FlushFileBuffers VirtualAlloc \
    WaitOnAddress WakeByAddressSingle GlobalMemoryStatusEx QueryInformationJobObject \
    GetFileInformationByHandleEx GetDiskFreeSpaceW MultiByteToWideChar FormatMessageW; do
    check "imports $f" has "$imports" "^$f\$"
done

# ---- the tests under Wine -----------------------------------------------------
export WINEPREFIX=$cache/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
    echo "== creating the Wine prefix $WINEPREFIX (once)"
    wineboot -i > "$cache/wineboot.log" 2>&1 || { tail -n 5 "$cache/wineboot.log"; fail "wineboot"; }
fi
# One wineserver for the whole run: one started by each short-lived wine
# process exits between them, and a process connecting while it goes down
# dies with "wine client error:0: recvmsg: Connection reset by peer".
wineserver -p && trap 'wineserver -k 2> /dev/null || true' EXIT
WINEPATH=$(winepath -w "$b/src" 2>/dev/null) && export WINEPATH

# ---- the installed package: pkg-config for the target -------------------------
echo "== the installed package (cmake --install, smoe_stream.pc)"
rm -rf "$b/install"
cmake --install "$b" > "$b.install.log" 2>&1 || { tail -n 5 "$b.install.log"; fail "install"; }
pc() { PKG_CONFIG_LIBDIR=$b/install/lib/pkgconfig PKG_CONFIG_PATH= pkg-config "$@" smoe_stream; }
check "smoe_stream.pc: $(pc --libs --static 2>&1)" has "$(pc --libs --static 2>&1)" "-lsynchronization"
fixture=$b/fixture
rm -rf "$fixture"
mkdir -p "$fixture"
"$WINE" "$exe" gen --out "$fixture/gen.smoe" --layers 2 --experts 4 --blob-bytes 65536 \
    > "$fixture/gen.log" 2>&1 || { cat "$fixture/gen.log"; fail "smoe.exe gen"; }
for link in shared static; do
    if [ "$link" = static ]; then
        flags="-static $(pc --cflags --libs --static)" || fail "pkg-config --static"
    else
        flags=$(pc --cflags --libs) || fail "pkg-config"
    fi
    check "quickstart.c built from smoe_stream.pc ($link) runs under Wine" sh -c \
        "$triple-gcc-posix -o '$fixture/quickstart-$link.exe' '$src/examples/quickstart.c' $flags &&
         '$WINE' '$fixture/quickstart-$link.exe' '$fixture/gen.smoe' > '$fixture/quickstart-$link.log' 2>&1"
done
# The shared one found the DLL through WINEPATH; the static one needs none.
check "the static quickstart imports no smoe_stream DLL" sh -c \
    "! $triple-objdump -p '$fixture/quickstart-static.exe' | grep -q 'DLL Name: smoe_stream'"

# ---- the smoe tool on the trained fixture --------------------------------------
echo "== smoe.exe under Wine on tests/fixtures/trained"
tool() { "$WINE" "$exe" "$@" > "$fixture/tool.log" 2>&1 || { cat "$fixture/tool.log"; return 1; }; }
tr=$src/tests/fixtures/trained
check "smoe pack model.safetensors" tool pack --quiet --out "$fixture/st.smoe" "$tr/model.safetensors"
check "smoe pack model-q8_0.gguf" tool pack --quiet --out "$fixture/q8.smoe" "$tr/model-q8_0.gguf"
check "smoe index model.safetensors" tool index --quiet --out "$fixture/ix.smoe" "$tr/model.safetensors"
for v in st q8 ix; do
    check "smoe verify $v.smoe" tool verify "$fixture/$v.smoe"
    check "smoe inspect --json $v.smoe" tool inspect --json "$fixture/$v.smoe"
done
check "smoe trace-gen" tool trace-gen -o "$fixture/t.trace" --layers 6 --experts 16 --top-k 4 \
    --tokens 32
check "smoe bench --mode all (packed and index vaults)" sh -c \
    "'$WINE' '$exe' bench --vault '$fixture/st.smoe' --trace '$fixture/t.trace' --mode all \
        --memory 1M --workers 2 --no-progress > '$fixture/bench.log' 2>&1 &&
     '$WINE' '$exe' bench --vault '$fixture/ix.smoe' --trace '$fixture/t.trace' --mode all \
        --memory 1M --workers 2 --no-progress >> '$fixture/bench.log' 2>&1"
echo "== tests under $("$WINE" --version 2>/dev/null || echo wine)"
# spin and the source-reading layout checks: stage 1 runs them. The call
# cycle check reads the Windows objects, with the *_win32.c files.
rc=0
(cd "$b" && ctest -j"$jobs" --timeout 900 -E '^(spin_|layout_slot_owner|layout_function_length)' \
    --output-on-failure \
    -V > "$b.ctest.log" 2>&1) || rc=$?
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|FAILED' "$b.ctest.log" | sed 's/^/  /'
# cmocka's own counts, over every program.
sed -n 's/^[0-9]*: //p' "$b.ctest.log" | awk '
    /^\[  PASSED  \] [0-9]+ test/ { passed += $4 }
    /^\[  SKIPPED \] [0-9]+ test/ { skipped += $4 }
    /^\[  FAILED  \] [0-9]+ test/ { failed += $4 }
    /^\[  SKIPPED \] [a-z]/ && !seen[$4]++ { names = names " " $4 }
    END { printf "  cmocka cases: %d passed, %d skipped, %d failed\n  skipped:%s\n",
                 passed, skipped, failed, names }'
[ "$rc" -eq 0 ] || status=1

if [ "$status" -ne 0 ]; then
    echo "Windows cross build: FAILED (logs: $b.build.log, $b.ctest.log)"
    exit 1
fi
echo "Windows cross build: built, checked, tests passed under Wine in $(($(date +%s) - start)) s"
