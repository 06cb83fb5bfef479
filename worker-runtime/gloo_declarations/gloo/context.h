#pragma once
// Stand-in for Gloo's <gloo/context.h> (README.md in gloo_declarations). ProcessGroupGloo.hpp
// holds contexts by shared_ptr, and its inline setTimeout calls Context::setTimeout, so the
// class must be complete with that member. Declared only: ddprun-train never calls it (the
// definition it would reach lives in libtorch_cpu.so).

#include <chrono>

namespace gloo {

class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};

}  // namespace gloo
