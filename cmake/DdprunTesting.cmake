# ddprun_add_test(NAME <name> SOURCES <files...> LIBS <targets...>
#                 LABELS <unit|integration|interop|slurm...> [TIMEOUT <seconds>] [ARGS <args...>]
#                 [OPTIMIZED] [COST <seconds>])
# One Catch2 executable per call, registered as one CTest test with labels and a timeout.
# COST: about how long it runs; `ctest -j` starts the costliest tests first, and a fresh build
# has no timings of its own yet (the longest would otherwise start last and run alone).
# Test programs compile at -O1 (in two thirds of -O3's time; they mostly wait on processes and
# sockets, and what they test is compiled as the build type says); OPTIMIZED keeps the build
# type's level, for a test whose own code does the heavy work (the round machine's model).
function(ddprun_add_test)
  cmake_parse_arguments(T "OPTIMIZED" "NAME;TIMEOUT;COST" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE ddprun_catch_main ${T_LIBS} ddprun::warnings)
  if(NOT T_OPTIMIZED)
    target_compile_options(${T_NAME} PRIVATE -O1)
  endif()
  target_compile_definitions(${T_NAME} PRIVATE
    DDPRUN_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
    DDPRUN_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DDPRUN_TORCH_PYTHON="${DDPRUN_TORCH_PYTHON}")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_COST)
    set_tests_properties(${T_NAME} PROPERTIES COST ${T_COST})
  endif()
endfunction()

# ddprun_add_skippable_test(NAME <name> TARGET <executable of ddprun_add_test> TAG <[tag]>
#                           LABELS <labels...> [TIMEOUT <seconds>])
# The test cases of TARGET tagged TAG, as a CTest test of their own that ctest reports skipped
# when one calls skip_test (tests/skip_test.hpp: exit 77). Catch2 2.13 has no SKIP; TARGET's own
# entry leaves those cases out (ARGS "~<tag>").
function(ddprun_add_skippable_test)
  cmake_parse_arguments(T "" "NAME;TARGET;TAG;TIMEOUT" "LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_TARGET} "${T_TAG}")
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77)
endfunction()
