# Compile flags shared by every halfscope target, and one helper to add a test.

function(halfscope_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
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
