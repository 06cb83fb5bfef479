# StoreKv: the KvBackend over a TCPStore-protocol server (ours, or PyTorch's of generation G0 or
# G2). Included by this folder's CMakeLists.txt.
target_sources(ddprun_backends PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/store_kv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store_kv_connection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store_kv_dialer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store_kv_requests.cpp)
