# The Windows form of the shared library (src/CMakeLists.txt):
# smoe_stream-<ABI major>.dll, as MinGW names versioned DLLs
# (libfoo-1.dll without the lib prefix here), and its import library
# libsmoe_stream.dll.a. Its exports are those of a module-definition file
# written at build time from the version script: the map stays the one list
# of exported names (tests/windows/check_exports.sh compares the DLL's export
# table with it).
function(smoe_windows_dll target map abi_major)
  set(def ${CMAKE_CURRENT_BINARY_DIR}/${target}.def)
  add_custom_command(OUTPUT ${def}
    COMMAND ${CMAKE_COMMAND} -DMAP=${map} -DDEF=${def}
            -DLIBRARY=${target}-${abi_major}.dll -P ${PROJECT_SOURCE_DIR}/cmake/map-to-def.cmake
    DEPENDS ${map} ${PROJECT_SOURCE_DIR}/cmake/map-to-def.cmake
    COMMENT "Writing ${target}.def from ${map}"
    VERBATIM)
  target_sources(${target} PRIVATE ${def})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    RUNTIME_OUTPUT_NAME ${target}-${abi_major}
    IMPORT_PREFIX lib
    ARCHIVE_OUTPUT_NAME ${target})
  # A DLL never leaves a symbol undefined; no stdcall decorations to strip.
  target_link_options(${target} PRIVATE "LINKER:--no-undefined")
endfunction()
