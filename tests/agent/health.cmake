# The agent's health-check server (TORCHELASTIC_HEALTH_CHECK_PORT): its request parsing, and
# end to end with the real ddprun, its loop stalled by ptrace.
ddprun_add_test(NAME agent_health_check_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/health_check_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 120)
target_include_directories(agent_health_check_test PRIVATE ${PROJECT_SOURCE_DIR})
