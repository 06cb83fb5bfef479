# Node checks before each join (--health-check, agent/node_check/): the pure parts (which checks
# apply, nvidia-smi's answer, the round machine's check-and-retry), the driver with real child
# processes (timeouts, folders, a stand-in nvidia-smi), and end to end with three real agents on
# loopback, one of them failing its check.
ddprun_add_test(NAME agent_node_check_unit_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/node_check_unit_test.cpp
  LIBS ddprun_agent
  LABELS unit TIMEOUT 30)

ddprun_add_test(NAME agent_node_check_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/node_check_test.cpp
  LIBS nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 120)
target_include_directories(agent_node_check_test PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(agent_node_check_test ddprun)

ddprun_add_test(NAME agent_node_check_driver_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/node_check_driver_test.cpp
  LIBS ddprun_agent
  LABELS integration TIMEOUT 120)
