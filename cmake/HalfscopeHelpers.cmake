# Compile flags shared by every halfscope target, and one helper to add a test.

function(halfscope_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  # GCC 12 at -O3 reports -Wrestrict on `"," + std::string` (GCC bug 105329, a false positive in
  # libstdc++'s inlined memcpy); other compilers keep the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
  endif()
  if(HALFSCOPE_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
endfunction()

# halfscope_add_test(NAME name SOURCES a.cpp ... [LABELS gpu ...])
# One GoogleTest executable registered with ctest; GPU cases skip themselves without a device.
function(halfscope_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE halfscope::halfscope halfscope_test_support GTest::gtest_main)
  halfscope_set_warnings(${T_NAME})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "HALFSCOPE_SOURCE_DIR=${PROJECT_SOURCE_DIR};HALFSCOPE_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
