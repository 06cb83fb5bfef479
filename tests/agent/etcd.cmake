# --rdzv_backend etcd end to end: real agents, a real 3-member etcd on loopback, the bundled
# trainer. Needs Debian's etcd-server (scripts/install-deps.sh).
# Without LibTorch there is no ddprun-train: its cases are not run (rather than passed).
set(etcd_e2e_filter "")
if(NOT DDPRUN_WITH_TORCH)
  set(etcd_e2e_filter "~[trainer]")
endif()
ddprun_add_test(NAME agent_etcd_e2e_test
  ARGS ${etcd_e2e_filter}
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/etcd_e2e_test.cpp
  LIBS nlohmann_json::nlohmann_json Threads::Threads
  LABELS integration TIMEOUT 600 COST 240)
target_include_directories(agent_etcd_e2e_test PRIVATE ${PROJECT_SOURCE_DIR})
