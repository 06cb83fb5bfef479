#pragma once
// Stand-in for Gloo's <gloo/rendezvous/store.h> (README.md in gloo_declarations).
// ProcessGroupGloo::GlooStore derives from this class and overrides these four members. Gloo's
// newer stores have more (GLOO_STORE_HAS_STORE_V2, left undefined here): GlooStore is built
// inside libtorch_cpu.so with torch's own Gloo, never in ddprun-train, so the class only has to
// declare what the header overrides.

#include <chrono>
#include <string>
#include <vector>

namespace gloo::rendezvous {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) = 0;
};

}  // namespace gloo::rendezvous
