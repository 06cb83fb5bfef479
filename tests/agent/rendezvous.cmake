# The rendezvous end to end without worker processes: headless agents on one event loop.
ddprun_add_test(NAME agent_rendezvous_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/rendezvous_agents_test.cpp
  LIBS ddprun_agent ddprun_test_store_client
  LABELS integration TIMEOUT 240)
