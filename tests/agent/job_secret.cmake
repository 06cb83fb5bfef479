# The job secret end to end: real ddprun agents on loopback, a wrong secret, a raw client.
ddprun_add_test(NAME agent_job_secret_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/job_secret_e2e_test.cpp
  LIBS ddprun_test_store_client
  LABELS integration TIMEOUT 240)
target_include_directories(agent_job_secret_test PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(agent_job_secret_test ddprun)

# The agents check the store: squatters on the endpoint's port, and a flood of strangers.
ddprun_add_test(NAME agent_store_squatters_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/store_squatters_e2e_test.cpp
  LIBS ddprun_store
  LABELS integration TIMEOUT 400)
target_include_directories(agent_store_squatters_test PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(agent_store_squatters_test ddprun ddprun-store)

# No child of ddprun (worker, --health-check command, stack tool) gets the job secret or etcd's
# password; the agent holding them is not dumpable. Needs Debian's etcd-server for its etcd case.
ddprun_add_test(NAME agent_child_environment_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/child_environment_e2e_test.cpp
  LIBS nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 240)
target_include_directories(agent_child_environment_test PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(agent_child_environment_test ddprun)
