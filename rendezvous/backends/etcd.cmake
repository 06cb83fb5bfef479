# The etcd backend (etcd/): the round machine's key-value operations on an etcd v3 cluster
# through its JSON gateway over HTTP/1.1 or HTTPS (Boost.Beast, OpenSSL). Included by
# CMakeLists.txt of this folder.
find_package(OpenSSL REQUIRED)
target_sources(ddprun_backends PRIVATE
  etcd/base64.cpp
  etcd/cas_update.cpp
  etcd/etcd_client.cpp
  etcd/etcd_codec.cpp
  etcd/etcd_kv.cpp
  etcd/etcd_options.cpp
  etcd/failover_log.cpp
  etcd/http_connection.cpp
  etcd/key_waiter.cpp
  etcd/lease_keeper.cpp
  etcd/tls_context.cpp
  etcd/txn_batch.cpp
  etcd/watch_stream.cpp)
target_link_libraries(ddprun_backends PUBLIC nlohmann_json::nlohmann_json OpenSSL::SSL
  OpenSSL::Crypto)
