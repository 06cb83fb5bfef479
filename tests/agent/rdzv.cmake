# Rendezvous-backend tests. The rdzv_* sources are compiled into their own library here, so these
# tests do not depend on the run loop building (and the run loop's tests not on these).
file(GLOB agent_rdzv_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/agent/rdzv_*.cpp)
add_library(ddprun_agent_rdzv_for_tests STATIC ${agent_rdzv_sources})
target_include_directories(ddprun_agent_rdzv_for_tests PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(ddprun_agent_rdzv_for_tests
  PUBLIC ddprun_store Threads::Threads nlohmann_json::nlohmann_json PRIVATE ddprun::warnings)

ddprun_add_test(NAME agent_rdzv_state_machine_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/rdzv_state_machine_test.cpp
  LIBS ddprun_agent_rdzv_for_tests
  LABELS unit TIMEOUT 30)

ddprun_add_test(NAME agent_rdzv_handlers_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/rdzv_handlers_test.cpp
  LIBS ddprun_agent_rdzv_for_tests
  LABELS integration TIMEOUT 120)
# The stalled-store test runs a real ddprun-store.
add_dependencies(agent_rdzv_handlers_test ddprun-store)
