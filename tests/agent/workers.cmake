# Run-loop and worker-supervision tests. The supervision sources are compiled into their own
# library here so these tests do not depend on the rendezvous backends (rdzv_*) building.
set(agent_supervision_sources
  ${PROJECT_SOURCE_DIR}/agent/console.cpp
  ${PROJECT_SOURCE_DIR}/agent/error_file.cpp
  ${PROJECT_SOURCE_DIR}/agent/event_log.cpp
  ${PROJECT_SOURCE_DIR}/agent/failure_summary.cpp
  ${PROJECT_SOURCE_DIR}/agent/heartbeat_channel.cpp
  ${PROJECT_SOURCE_DIR}/agent/log_layout.cpp
  ${PROJECT_SOURCE_DIR}/agent/log_prefix.cpp
  ${PROJECT_SOURCE_DIR}/agent/output_pump.cpp
  ${PROJECT_SOURCE_DIR}/agent/signal_channel.cpp
  ${PROJECT_SOURCE_DIR}/agent/worker_env.cpp
  ${PROJECT_SOURCE_DIR}/agent/worker_exit.cpp
  ${PROJECT_SOURCE_DIR}/agent/worker_group.cpp
  ${PROJECT_SOURCE_DIR}/agent/worker_process.cpp)
add_library(ddprun_agent_supervision_for_tests STATIC ${agent_supervision_sources})
target_include_directories(ddprun_agent_supervision_for_tests PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(ddprun_agent_supervision_for_tests
  PUBLIC ddprun_round Threads::Threads nlohmann_json::nlohmann_json PRIVATE ddprun::warnings)

ddprun_add_test(NAME agent_supervision_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/supervision_unit_test.cpp
  LIBS ddprun_agent_supervision_for_tests
  LABELS unit TIMEOUT 30)

ddprun_add_test(NAME agent_worker_group_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/worker_group_test.cpp
  LIBS ddprun_agent_supervision_for_tests
  LABELS integration TIMEOUT 60)

# End-to-end: the real ddprun binary, several agents on 127.0.0.x.
ddprun_add_test(NAME agent_e2e_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/agent_e2e_test.cpp
  LIBS nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 240)
target_include_directories(agent_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})

# Against the reference torchrun and with real PyTorch workers (python3-torch).
ddprun_add_test(NAME agent_interop_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/agent_interop_test.cpp
  LABELS interop TIMEOUT 300)

# Against torchrun 2.13 from the project's .venv (scripts/install-deps.sh): output modes under a
# terminal, the failure table, worker environment, duplicate filters.
ddprun_add_test(NAME agent_torchrun_parity_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/torchrun_parity_test.cpp
  LABELS interop TIMEOUT 300)
