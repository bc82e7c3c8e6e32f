# Cross-compile for 64-bit Windows with Debian's MinGW-w64 (package
# gcc-mingw-w64-x86-64); tests/windows/build.sh is the usual entry point.
#
#   cmake -S . -B build/windows -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
#
# The "posix" flavour of the compiler: its runtime carries winpthreads, which
# the library core's pthread_* calls use. Libraries other than the MinGW
# runtime come from the prefixes in CMAKE_FIND_ROOT_PATH (json-c, zlib and
# cmocka built for the target by tests/windows/build.sh) and from pkg-config
# with PKG_CONFIG_LIBDIR pointing there; nothing of the host's is searched.
# xxHash is compiled in from the host's xxhash.h (SMOE_XXHASH_INLINE).
cmake_minimum_required(VERSION 3.20)

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(SMOE_MINGW_TRIPLE x86_64-w64-mingw32)

find_program(SMOE_MINGW_CC NAMES ${SMOE_MINGW_TRIPLE}-gcc-posix REQUIRED)
set(CMAKE_C_COMPILER ${SMOE_MINGW_CC})
find_program(SMOE_MINGW_CXX NAMES ${SMOE_MINGW_TRIPLE}-g++-posix)
if(SMOE_MINGW_CXX)
  set(CMAKE_CXX_COMPILER ${SMOE_MINGW_CXX})
endif()
set(CMAKE_RC_COMPILER ${SMOE_MINGW_TRIPLE}-windres)
set(CMAKE_AR ${SMOE_MINGW_TRIPLE}-gcc-ar-posix CACHE FILEPATH "")
set(CMAKE_RANLIB ${SMOE_MINGW_TRIPLE}-gcc-ranlib-posix CACHE FILEPATH "")
# Programs run under Wine (ctest, tests/windows/build.sh).
find_program(SMOE_WINE NAMES wine64 wine)
if(SMOE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SMOE_WINE})
endif()

set(SMOE_XXHASH_INLINE ON CACHE BOOL "" FORCE)
list(APPEND CMAKE_FIND_ROOT_PATH /usr/${SMOE_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Self-contained programs and DLL: the GCC runtime and winpthreads linked in
# rather than libgcc_s_seh-1.dll and libwinpthread-1.dll beside them; only
# Windows' own DLLs are imported.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-static")
