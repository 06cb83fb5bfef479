# `ddprun stacks`: the answer record (pure), and end to end: two real agents on a loopback
# c10d endpoint with Python workers, asked for their stacks while the job runs on.
ddprun_add_test(NAME agent_stacks_on_demand_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/stacks_on_demand_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 180)
target_include_directories(agent_stacks_on_demand_test PRIVATE ${PROJECT_SOURCE_DIR})
