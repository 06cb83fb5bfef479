# Hang watchdogs: torchrun's file timer, the progress heartbeat, stack capture and the hang
# report. Their sources are compiled into their own library here, so these tests depend on
# neither the run loop nor the rendezvous backends building.
set(agent_watchdog_sources
  ${PROJECT_SOURCE_DIR}/agent/file_timer_fifo.cpp
  ${PROJECT_SOURCE_DIR}/agent/file_timer_request.cpp
  ${PROJECT_SOURCE_DIR}/agent/file_timer_server.cpp
  ${PROJECT_SOURCE_DIR}/agent/file_timer_setup.cpp
  ${PROJECT_SOURCE_DIR}/agent/hang_report.cpp
  ${PROJECT_SOURCE_DIR}/agent/heartbeat_channel.cpp
  ${PROJECT_SOURCE_DIR}/agent/progress_watch.cpp
  ${PROJECT_SOURCE_DIR}/agent/stack_capture_plan.cpp
  ${PROJECT_SOURCE_DIR}/agent/stack_capture_probe.cpp
  ${PROJECT_SOURCE_DIR}/agent/stack_capture_runner.cpp
  ${PROJECT_SOURCE_DIR}/agent/stack_trace_parser.cpp
  ${PROJECT_SOURCE_DIR}/agent/timer_table.cpp
  ${PROJECT_SOURCE_DIR}/agent/worker_exit.cpp
  # The trainer's side of the heartbeat has no LibTorch, so it is tested here too.
  ${PROJECT_SOURCE_DIR}/worker-runtime/progress_heartbeat.cpp)
add_library(ddprun_agent_watchdog_for_tests STATIC ${agent_watchdog_sources})
target_include_directories(ddprun_agent_watchdog_for_tests PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(ddprun_agent_watchdog_for_tests
  PUBLIC nlohmann_json::nlohmann_json PRIVATE ddprun::warnings)

# Pure parts: request parser, timer table, progress watch, env contract, stack planner and
# parsers, hang report.
ddprun_add_test(NAME agent_watchdog_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_protocol_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_progress_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_report_test.cpp
  LIBS ddprun_agent_watchdog_for_tests
  LABELS unit TIMEOUT 30)

# The FIFO with PyTorch's own FileTimerClient (skipped, saying so, without a PyTorch 2.x venv)
# and with plain shell writers.
ddprun_add_test(NAME agent_watchdog_fifo_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_fifo_test.cpp
  LIBS ddprun_agent_watchdog_for_tests
  LABELS integration TIMEOUT 90)

# Heartbeat pipes with real child processes; stack capture of real sleeping and stopped ones.
ddprun_add_test(NAME agent_watchdog_process_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_heartbeat_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_stack_test.cpp
  LIBS ddprun_agent_watchdog_for_tests
  LABELS integration TIMEOUT 90)

# End to end: the real ddprun binary with the watchdogs wired into its event loop (file timer
# with PyTorch's FileTimerClient and gloo, --watchdog-timeout with the bundled trainer, garbage
# in the FIFO). Each case is bounded well under a minute.
ddprun_add_test(NAME agent_watchdog_e2e_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/watchdog_e2e_test.cpp
  LIBS ddprun_agent_watchdog_for_tests nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 180)
