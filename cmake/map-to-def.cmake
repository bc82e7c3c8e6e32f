# cmake -DMAP=smoe_stream.map -DDEF=out.def -DLIBRARY=name.dll -P map-to-def.cmake
# A module-definition file exporting the global names of a GNU version
# script (one "name;" per line in its nodes' global: sections).
file(STRINGS ${MAP} lines)
set(out "LIBRARY ${LIBRARY}\nEXPORTS\n")
set(global OFF)
foreach(line IN LISTS lines)
  string(STRIP "${line}" line)
  if(line MATCHES "^global:")
    set(global ON)
  elseif(line MATCHES "^local:" OR line MATCHES "^}")
    set(global OFF)
  elseif(global AND line MATCHES "^([A-Za-z_][A-Za-z0-9_]*);")
    string(APPEND out "  ${CMAKE_MATCH_1}\n")
  endif()
endforeach()
file(WRITE ${DEF}.tmp "${out}")
file(RENAME ${DEF}.tmp ${DEF})
