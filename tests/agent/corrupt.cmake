# Corrupt records: a hostile client writes junk into every key of a running c10d round; both
# real ddprun agents stop naming a corrupt key, never "lost the connection", never a crash.
ddprun_add_test(NAME agent_corrupt_records_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/corrupt_records_test.cpp
  LIBS ddprun_backends ddprun_store
  LABELS integration TIMEOUT 420 COST 60)
target_include_directories(agent_corrupt_records_test PRIVATE ${PROJECT_SOURCE_DIR})
# With LibTorch, a case trains the bundled trainer through the hostile run.
target_compile_definitions(agent_corrupt_records_test
  PRIVATE DDPRUN_HAS_TRAINER=$<BOOL:${DDPRUN_WITH_TORCH}>)
if(DDPRUN_WITH_TORCH)
  add_dependencies(agent_corrupt_records_test ddprun-train)
endif()
