# The etcd backend (etcd/): the round machine's key-value operations on an etcd v3 cluster
# through its JSON gateway over HTTP/1.1 or HTTPS (Boost.Beast; OpenSSL in a module of its own).
# Included by CMakeLists.txt of this folder.
target_sources(ddprun_backends PRIVATE
  etcd/base64.cpp
  etcd/beat_watch.cpp
  etcd/cas_update.cpp
  etcd/etcd_client.cpp
  etcd/etcd_codec.cpp
  etcd/etcd_kv.cpp
  etcd/etcd_options.cpp
  etcd/failover_log.cpp
  etcd/http_connection.cpp
  etcd/key_waiter.cpp
  etcd/lease_keeper.cpp
  etcd/range_coalescer.cpp
  etcd/tls_context.cpp
  etcd/tls_stream.cpp
  etcd/txn_batch.cpp
  etcd/watch_stream.cpp)
target_link_libraries(ddprun_backends PUBLIC nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})

if(NOT DDPRUN_ETCD_TLS)
  # https members then fail with a message saying this ddprun has no TLS module (tls_context.cpp).
  return()
endif()
find_package(OpenSSL REQUIRED)
# The TLS module: the only thing that links OpenSSL (libssl and libcrypto map about 1.7 MiB).
# ddprun loads it with dlopen for the first https member (etcd/tls_context.cpp), from
# <program>/../lib/ddprun/ or beside the program; its interface is C (etcd/tls_engine_abi.h)
# and it uses no C++ runtime, so ddprun's static one stays the only one.
add_library(ddprun_etcd_tls MODULE etcd/tls_engine_module.cpp)
target_include_directories(ddprun_etcd_tls PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(ddprun_etcd_tls PRIVATE -fno-exceptions -fno-rtti -fvisibility=hidden)
target_link_libraries(ddprun_etcd_tls PRIVATE OpenSSL::SSL OpenSSL::Crypto ddprun::warnings)
target_link_options(ddprun_etcd_tls PRIVATE -Wl,--as-needed -Wl,--no-undefined)
set_target_properties(ddprun_etcd_tls PROPERTIES
  OUTPUT_NAME ddprun_etcd_tls
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib/ddprun)
# Whatever links the backend (ddprun, tests, the simulator) gets the module built beside it.
add_dependencies(ddprun_backends ddprun_etcd_tls)
