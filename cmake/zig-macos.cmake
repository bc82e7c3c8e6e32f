# Cross-compile for macOS with zig's bundled clang, macOS headers and
# libSystem stubs; tests/macos/build.sh is the usual entry point.
#
#   cmake -S . -B build/macos-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/zig-macos.cmake \
#         -DSMOE_ZIG=/path/to/zig -DSMOE_ZIG_TARGET=aarch64-macos
#
# SMOE_ZIG_TARGET: aarch64-macos (Apple Silicon) or x86_64-macos. Libraries
# other than libSystem come from the prefixes in CMAKE_FIND_ROOT_PATH and
# from pkg-config with PKG_CONFIG_LIBDIR pointing there; nothing of the host's
# is searched. xxHash is compiled in from the host's xxhash.h
# (SMOE_XXHASH_INLINE).
cmake_minimum_required(VERSION 3.20)

set(CMAKE_SYSTEM_NAME Darwin)
# Darwin 20 is macOS 11, the oldest release zig 0.11 targets.
set(CMAKE_SYSTEM_VERSION 20.6.0)
# CMake learns that the linker takes -rpath (and so gives the library the
# install name @rpath/...) from sw_vers, which only a Mac has: say it after
# the platform files have run.
set(CMAKE_USER_MAKE_RULES_OVERRIDE "${CMAKE_CURRENT_LIST_DIR}/zig-macos-rules.cmake")
if(NOT SMOE_ZIG)
  set(SMOE_ZIG "$ENV{SMOE_ZIG}")
endif()
if(NOT SMOE_ZIG_TARGET)
  set(SMOE_ZIG_TARGET "$ENV{SMOE_ZIG_TARGET}")
endif()
if(NOT SMOE_ZIG OR NOT SMOE_ZIG_TARGET)
  message(FATAL_ERROR "zig-macos.cmake: set SMOE_ZIG (the zig binary) and SMOE_ZIG_TARGET "
                      "(aarch64-macos or x86_64-macos)")
endif()
# try_compile projects read the toolchain file again: pass both on.
set(ENV{SMOE_ZIG} "${SMOE_ZIG}")
set(ENV{SMOE_ZIG_TARGET} "${SMOE_ZIG_TARGET}")
if(SMOE_ZIG_TARGET MATCHES "^aarch64")
  set(CMAKE_SYSTEM_PROCESSOR arm64)
else()
  set(CMAKE_SYSTEM_PROCESSOR x86_64)
endif()

# zig is one binary with subcommands; CMake wants one program per tool.
set(_smoe_wrap "${CMAKE_BINARY_DIR}/zig-${SMOE_ZIG_TARGET}")
file(READ "${CMAKE_CURRENT_LIST_DIR}/zig-cc.in" _smoe_cc)
string(CONFIGURE "${_smoe_cc}" _smoe_cc @ONLY)
file(WRITE "${_smoe_wrap}/zig-cc" "${_smoe_cc}")
file(WRITE "${_smoe_wrap}/zig-ar" "#!/bin/sh\nexec \"${SMOE_ZIG}\" ar \"$@\"\n")
file(WRITE "${_smoe_wrap}/zig-ranlib" "#!/bin/sh\nexec \"${SMOE_ZIG}\" ranlib \"$@\"\n")
foreach(_tool cc ar ranlib)
  file(CHMOD "${_smoe_wrap}/zig-${_tool}" PERMISSIONS
       OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
set(CMAKE_C_COMPILER "${_smoe_wrap}/zig-cc")
set(CMAKE_AR "${_smoe_wrap}/zig-ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "${_smoe_wrap}/zig-ranlib" CACHE FILEPATH "")
# No Xcode here: no SDK path to look up, no install_name_tool.
set(CMAKE_OSX_SYSROOT "" CACHE PATH "")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "")

set(SMOE_XXHASH_INLINE ON CACHE BOOL "" FORCE)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
