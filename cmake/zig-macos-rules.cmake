# Read after CMake's Darwin platform files (CMAKE_USER_MAKE_RULES_OVERRIDE
# of cmake/zig-macos.cmake): what they would have set on a Mac.
set(CMAKE_SHARED_LIBRARY_RUNTIME_C_FLAG "-Wl,-rpath,")
