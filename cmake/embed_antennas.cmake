# Embeds data/antennas/meerkat.csv into the library as a C++ raw string literal, so the binary needs
# no data path at run time (sim::meerkat_antennas()). Included from src/CMakeLists.txt, it defines
# the build-time step and sets HALFSCOPE_EMBEDDED_ANTENNAS_SOURCE to the generated file; run with
# `cmake -DIN=... -DOUT=... -P embed_antennas.cmake` (what that step does), it writes the file.

if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${IN}" _hs_csv)
  # The delimiter must not occur in the data, or the literal would end early.
  string(FIND "${_hs_csv}" ")hs_antennas\"" _hs_clash)
  if(NOT _hs_clash EQUAL -1)
    message(FATAL_ERROR "${IN} contains the raw-string delimiter )hs_antennas\"")
  endif()
  set(_hs_text "// Generated from ${IN} by cmake/embed_antennas.cmake: do not edit.\n")
  string(APPEND _hs_text "#include \"halfscope/sim/radio.hpp\"\n\n")
  string(APPEND _hs_text "namespace halfscope::sim::detail {\n\n")
  string(APPEND _hs_text "std::string_view meerkat_csv_text() {\n")
  string(APPEND _hs_text
         "  static constexpr char kText[] = R\"hs_antennas(${_hs_csv})hs_antennas\";\n")
  string(APPEND _hs_text "  return {kText, sizeof kText - 1};\n}\n\n")
  string(APPEND _hs_text "}  // namespace halfscope::sim::detail\n")
  # Written only when it changes, so an unchanged table recompiles nothing.
  file(WRITE "${OUT}.tmp" "${_hs_text}")
  file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
  file(REMOVE "${OUT}.tmp")
  return()
endif()

set(_hs_antennas_csv ${PROJECT_SOURCE_DIR}/data/antennas/meerkat.csv)
set(HALFSCOPE_EMBEDDED_ANTENNAS_SOURCE
    ${PROJECT_BINARY_DIR}/generated/halfscope/antennas_meerkat.cpp)
add_custom_command(
  OUTPUT ${HALFSCOPE_EMBEDDED_ANTENNAS_SOURCE}
  COMMAND ${CMAKE_COMMAND} -DIN=${_hs_antennas_csv} -DOUT=${HALFSCOPE_EMBEDDED_ANTENNAS_SOURCE}
          -P ${CMAKE_CURRENT_LIST_FILE}
  DEPENDS ${_hs_antennas_csv} ${CMAKE_CURRENT_LIST_FILE}
  COMMENT "Embedding the MeerKAT antenna table"
  VERBATIM)
