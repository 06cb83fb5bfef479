# Hang watchdogs: torchrun's file timer, the progress heartbeat, stack capture and the hang
# report. The trainer's side of the heartbeat has no LibTorch, so it is tested here too, also in
# builds without worker-runtime/ (DDPRUN_WITH_TORCH=OFF).
add_library(ddprun_progress_heartbeat_for_tests STATIC
            ${PROJECT_SOURCE_DIR}/worker-runtime/progress_heartbeat.cpp)
target_link_libraries(ddprun_progress_heartbeat_for_tests PRIVATE ddprun::warnings)
set(agent_watchdog_libs ddprun_agent ddprun_progress_heartbeat_for_tests)

# Pure parts: request parser, timer table, progress watch, env contract, stack planner and
# parsers, hang report.
ddprun_add_test(NAME agent_watchdog_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_protocol_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_progress_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_report_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_faulthandler_test.cpp
  LIBS ${agent_watchdog_libs}
  LABELS unit TIMEOUT 30)

# The FIFO with PyTorch's own FileTimerClient (skipped, saying so, without a PyTorch 2.x venv)
# and with plain shell writers.
ddprun_add_test(NAME agent_watchdog_fifo_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_fifo_test.cpp
  LIBS ${agent_watchdog_libs}
  LABELS integration TIMEOUT 90)

# Heartbeat pipes with real child processes; stack capture of real sleeping and stopped ones.
ddprun_add_test(NAME agent_watchdog_process_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_heartbeat_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_stack_test.cpp
  LIBS ${agent_watchdog_libs}
  LABELS integration TIMEOUT 90)

# End to end: the real ddprun binary with the watchdogs wired into its event loop (file timer
# with PyTorch's FileTimerClient and gloo, --watchdog-timeout with the bundled trainer, garbage
# in the FIFO; a Python worker without py-spy, through faulthandler). Each case is bounded well
# under a minute.
# Without LibTorch there is no ddprun-train: its case is not run (rather than passed).
set(watchdog_e2e_filter "")
if(NOT DDPRUN_WITH_TORCH)
  set(watchdog_e2e_filter "~[trainer]")
endif()
ddprun_add_test(NAME agent_watchdog_e2e_test
  ARGS ${watchdog_e2e_filter}
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_e2e_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_python_test.cpp
  LIBS ${agent_watchdog_libs} nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 180)
