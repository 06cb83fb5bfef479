# The agent's health-check server (TORCHELASTIC_HEALTH_CHECK_PORT): its request parsing, and
# end to end with the real ddprun, its loop stalled by ptrace.
ddprun_add_test(NAME agent_health_check_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/health_check_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS integration TIMEOUT 120)
target_include_directories(agent_health_check_test PRIVATE ${PROJECT_SOURCE_DIR})
# The job page: its pure parts (token, node records, JSON API), and the page in a real headless
# Chromium, a 2-node job on loopback with a job secret (its own CTest test: skipped without
# Chromium, or without root for the second node's UTS namespace).
ddprun_add_test(NAME agent_job_page_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/job_page_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/job_page_browser_test.cpp
  LIBS ddprun_agent nlohmann_json::nlohmann_json
  LABELS unit TIMEOUT 60 ARGS "~[browser]")
target_include_directories(agent_job_page_test PRIVATE ${PROJECT_SOURCE_DIR})
ddprun_add_skippable_test(NAME agent_job_page_in_chromium TARGET agent_job_page_test
  TAG "[browser]" LABELS integration TIMEOUT 300)
