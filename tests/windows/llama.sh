#!/bin/sh
# ggml-smoe.dll against llama.cpp for Windows, under Wine: the tested
# llama.cpp tree (integrations/llama.cpp/fetch-llama.sh; stage 6 puts it in
# ~/.cache/smoe-llama/llama.cpp) cross-compiled with MinGW-w64 as shared
# libraries (ggml, ggml-base, ggml-cpu, llama) with llama-completion.exe,
# and the plugin (integrations/llama.cpp/plugin) as ggml-smoe.dll. Then, on
# the trained fixture (tests/fixtures/trained/model-bf16.gguf, a byte-level
# vocabulary) packed by smoe.exe, llama-completion.exe under Wine greedy-
# decodes a prompt stock and with the plugin loaded through
# GGML_BACKEND_PATH (-ot exps=SMOE, SMOE_VAULT), at the ring's full size and
# at top-k slots: the text must be identical.
#
# Usage: tests/windows/llama.sh WINDOWS_BUILD_DIR   (the build/windows of
# tests/windows/build.sh, for smoe.exe and the Wine prefix)
# The build goes to WINDOWS_BUILD_DIR/llama-build, compiled through ccache
# with its cache in ${SMOE_WINDOWS_CACHE:-~/.cache/smoe-windows}/llama-ccache
# and paths hashed relative to the clone, so that a second run, in this
# clone or a fresh one, compiles little (a build directory is tied to its
# source's path, so it cannot live in the cache for every clone). SMOE_LLAMA_CPP_DIR names another llama.cpp tree.
# Where the tree, MinGW-w64 or Wine is missing: SKIP, exit 0 (FAIL, exit 1,
# with SMOE_REQUIRE_WINDOWS=1).
set -eu
cd "$(dirname "$0")/../.."
src=$(pwd)
wb=$(cd "${1:?usage: tests/windows/llama.sh WINDOWS_BUILD_DIR}" && pwd)
cache=${SMOE_WINDOWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-windows}
llama=${SMOE_LLAMA_CPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama/llama.cpp}
jobs=${SMOE_JOBS:-$(nproc 2>/dev/null || echo 2)}
lb=$wb/llama-build

skip() {
    if [ "${SMOE_REQUIRE_WINDOWS:-0}" = 1 ]; then
        echo "FAIL: llama.cpp for Windows (required: SMOE_REQUIRE_WINDOWS=1): $*"
        exit 1
    fi
    echo "SKIP: llama.cpp for Windows: $*"
    exit 0
}
fail() {
    echo "FAIL: llama.cpp for Windows: $*"
    exit 1
}
[ -f "$llama/include/llama.h" ] ||
    skip "no llama.cpp tree in $llama (integrations/llama.cpp/fetch-llama.sh DIR)"
[ -x "$wb/tools/smoe/smoe.exe" ] || skip "no $wb/tools/smoe/smoe.exe (tests/windows/build.sh first)"
WINE=$(command -v wine64 || command -v wine || true)
[ -x /usr/lib/wine/wine64 ] && WINE=/usr/lib/wine/wine64
[ -n "$WINE" ] || skip "wine not found"
export WINEPREFIX=$cache/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
[ -f "$WINEPREFIX/system.reg" ] || skip "no Wine prefix in $WINEPREFIX (tests/windows/build.sh first)"
# One wineserver for the whole run: one started by each short-lived wine
# process exits between them, and a process connecting while it goes down
# dies with "wine client error:0: recvmsg: Connection reset by peer".
wineserver -p && trap 'wineserver -k 2> /dev/null || true' EXIT

# ---- build -------------------------------------------------------------------
start=$(date +%s)
launcher=
if command -v ccache > /dev/null 2>&1; then
    launcher=ccache
    export CCACHE_DIR=$cache/llama-ccache CCACHE_BASEDIR=$src
fi
runtime=libpthread.a:libwinpthread.a:libstdc++.a:libgcc.a:libgcc_eh.a
mkdir -p "$lb"
echo "== llama.cpp and ggml-smoe.dll for Windows in $lb"
# GGML_NATIVE off: the host's -march=native means nothing to the target;
# ggml's baseline x86-64 kernels serve the fixture. -static as in
# cmake/mingw-w64.cmake (the GCC runtime and winpthreads in each DLL), with
# --exclude-libs naming them so that no DLL exports them: ggml-base.dll
# would otherwise export winpthreads' pthread_* and the next DLL's link find
# them twice. (Not ALL: CMake links a DLL's own objects as an archive too.)
cmake -S "$src" -B "$lb" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/mingw-w64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DSMOE_WERROR=ON -DSMOE_BUILD_LLAMA=ON \
    -DSMOE_LLAMA_CPP_DIR="$llama" -DSMOE_BUILD_TOOL=OFF -DSMOE_BUILD_TESTS=OFF \
    -DSMOE_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF \
    -DCMAKE_SHARED_LINKER_FLAGS="-static -Wl,--exclude-libs,$runtime" \
    -DCMAKE_EXE_LINKER_FLAGS="-static -Wl,--exclude-libs,$runtime" \
    ${launcher:+-DCMAKE_C_COMPILER_LAUNCHER=$launcher -DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} \
    > "$lb/configure.log" 2>&1 || { tail -n 30 "$lb/configure.log"; fail "configure"; }
cmake --build "$lb" -j"$jobs" --target ggml ggml-base ggml-cpu llama llama-completion \
    ggml-smoe > "$lb/build.log" 2>&1 ||
    { grep -E "error|Error" "$lb/build.log" | head -n 40; fail "build"; }
echo "  built in $(($(date +%s) - start)) s"

bin=$lb/bin
plugin=$lb/integrations/llama.cpp/ggml-smoe.dll
# ggml's OpenMP threads: GCC's libgomp-1.dll (and what it imports) beside
# the programs, from the MinGW-w64 compiler's own directories.
for d in libgomp-1.dll libgcc_s_seh-1.dll libwinpthread-1.dll; do
    f=$(x86_64-w64-mingw32-gcc-posix -print-file-name=$d)
    [ -f "$f" ] || f=/usr/x86_64-w64-mingw32/lib/$d
    [ -f "$f" ] && cp "$f" "$bin/"
done
exe=$bin/llama-completion.exe
for f in "$exe" "$plugin" "$bin/ggml-base.dll" "$bin/ggml-cpu.dll" "$bin/libllama.dll"; do
    [ -f "$f" ] || fail "$f was not built"
done
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
imports() { x86_64-w64-mingw32-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: //p' | tr '\n' ' '; }
# The plugin uses the very ggml-base.dll and ggml-cpu.dll the program loads,
# and exports ggml_backend_init alone.
check "ggml-smoe.dll imports: $(imports "$plugin")" sh -c \
    "x86_64-w64-mingw32-objdump -p '$plugin' | grep -q 'DLL Name: ggml-base.dll'"
exports=$(x86_64-w64-mingw32-objdump -p "$plugin" |
    awk '/\[Ordinal\/Name Pointer\] Table/ { t = 1; next } t && NF == 0 { t = 0 } t { print $NF }')
# (the library's smoe_* are dllexport'ed in its objects and come along)
check "ggml-smoe.dll exports ggml_backend_init" sh -c \
    "printf '%s\n' '$(echo $exports)' | tr ' ' '\n' | grep -qx ggml_backend_init"
check "VirtualAlloc imported (the expert tensors' address space)" sh -c \
    "x86_64-w64-mingw32-objdump -p '$plugin' | grep -q VirtualAlloc"

# ---- identical tokens under Wine -------------------------------------------------
work=$lb/run
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fx=$src/tests/fixtures/trained/model-bf16.gguf
cp "$fx" model.gguf
"$WINE" "$wb/tools/smoe/smoe.exe" pack --quiet --out model.smoe model.gguf > pack.log 2>&1 ||
    { cat pack.log; fail "smoe.exe pack"; }
entries=$("$WINE" "$wb/tools/smoe/smoe.exe" inspect model.smoe | sed -n 's/^entries *\([0-9]*\).*/\1/p')
topk=$("$WINE" "$wb/tools/smoe/smoe.exe" inspect model.smoe | sed -n 's/^top_k *\([0-9]*\).*/\1/p')
[ -n "$entries" ] && [ -n "$topk" ] || fail "cannot read entries and top_k from smoe inspect"
export WINEPATH="$(winepath -w "$bin")"
prompt="def fibonacci(n):"
complete() { # OUT [NAME=VALUE...]
    o=$1
    shift
    env "$@" "$WINE" "$exe" -m model.gguf -p "$prompt" -n 32 --temp 0 --seed 7 -t 2 -c 256 \
        --ignore-eos -no-cnv --no-warmup -nr $extra < /dev/null > "$o.out" 2> "$o.err"
}
extra=
check "stock llama-completion.exe runs under Wine" complete ref ||
    { tail -n 20 ref.err; fail "stock llama-completion.exe"; }
[ "$(wc -c < ref.out)" -gt "${#prompt}" ] || { tail -n 20 ref.err; fail "stock run printed no tokens"; }
echo "  stock text: $(head -c 120 ref.out | tr '\n' ' ')"
dll=$(winepath -w "$plugin")
extra="-ot exps=SMOE"
for slots in "$entries" "$topk"; do
    o=s$slots
    if complete $o GGML_BACKEND_PATH="$dll" SMOE_VAULT=model.smoe SMOE_RING_SLOTS=$slots; then
        check "the plugin's ring is $slots slots" grep -q "ring $slots slots" $o.err
        check "identical text with ggml-smoe.dll at $slots slots" cmp -s ref.out $o.out ||
            diff ref.out $o.out | head -n 5
    else
        tail -n 20 $o.err
        check "llama-completion.exe with ggml-smoe.dll at $slots slots" false
    fi
done
if [ "$status" -ne 0 ]; then
    echo "llama.cpp for Windows: FAILED (logs in $work, build log $lb/build.log)"
    exit 1
fi
echo "llama.cpp for Windows: ggml-smoe.dll gives stock tokens under Wine in $(($(date +%s) - start)) s"
