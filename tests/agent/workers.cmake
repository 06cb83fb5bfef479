# Run-loop and worker-supervision tests.
ddprun_add_test(NAME agent_supervision_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/supervision_unit_test.cpp
  LIBS ddprun_agent
  LABELS unit TIMEOUT 30)

ddprun_add_test(NAME agent_live_control_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/live_control_unit_test.cpp
  LIBS ddprun_agent
  LABELS unit TIMEOUT 30)

ddprun_add_test(NAME agent_worker_group_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/worker_group_test.cpp
  LIBS ddprun_agent
  LABELS integration TIMEOUT 60
  ARGS "~[freezer]")
target_include_directories(agent_worker_group_test PRIVATE ${PROJECT_SOURCE_DIR})
# The case that needs a cgroup v1 freezer: reported skipped where there is none.
ddprun_add_skippable_test(NAME agent_worker_group_freezer_test
  TARGET agent_worker_group_test TAG "[freezer]"
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

# A worker SIGKILL cannot end (frozen by a cgroup v1 freezer, else held by a ptrace tracer): the
# real ddprun abandons it after TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT and exits or restarts.
ddprun_add_test(NAME agent_stuck_worker_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/stuck_worker_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 240)
target_include_directories(agent_stuck_worker_test PRIVATE ${PROJECT_SOURCE_DIR})
