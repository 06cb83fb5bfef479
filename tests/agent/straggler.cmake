# Stragglers (--straggler-factor): step intervals and the job-wide comparison (pure), and end
# to end: two real agents, one of four workers deliberately slow.
ddprun_add_test(NAME agent_straggler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/straggler_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 180)
target_include_directories(agent_straggler_test PRIVATE ${PROJECT_SOURCE_DIR})
