# ddprun_add_test(NAME <name> SOURCES <files...> LIBS <targets...>
#                 LABELS <unit|integration|interop|slurm...> [TIMEOUT <seconds>])
# One Catch2 executable per call, registered as one CTest test with labels and a timeout.
function(ddprun_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE ddprun_catch_main ${T_LIBS} ddprun::warnings)
  target_compile_definitions(${T_NAME} PRIVATE
    DDPRUN_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
    DDPRUN_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DDPRUN_TORCH_PYTHON="${DDPRUN_TORCH_PYTHON}")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
