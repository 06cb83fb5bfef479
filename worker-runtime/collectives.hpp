#pragma once
// The process group the trainer talks through: ProcessGroupNCCL on cuda:LOCAL_RANK when LibTorch
// was built with CUDA and NCCL and that GPU is visible, else ProcessGroupGloo on CPU. Ranks meet
// through a c10d TCPStore (a client of the agent's store under PyTorch's
// "/worker/attempt_<restart>" prefix, or hosted by rank 0).
// Before either, the ranks check through the store that all or none of them have a GPU
// (device_agreement.hpp): a mixed world fails at once instead of hanging.
// A world of one on CPU needs no backend and runs no collectives. On a GPU it still goes through
// ProcessGroupNCCL (over an in-process HashStore), as PyTorch's DDP does: a one-GPU machine then
// runs the same NCCL path as a multi-GPU job, at the cost of a device-local copy per bucket.
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "run_environment.hpp"
#include "socket_set.hpp"

namespace c10d {
class Store;
class Work;
class Backend;  // ProcessGroupGloo and ProcessGroupNCCL derive from it (LibTorch >= 2.0)
}  // namespace c10d

namespace ddprun::train {

// A collective (or the building of a process group) that failed: a peer went away, or abort()
// ended it. Live recovery waits for the next world on it; without live recovery it ends the run
// as any error does.
class CollectiveFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Collectives {
 public:
  // Connects to (or hosts) the store and builds the backend; throws std::runtime_error naming the
  // store address on failure.
  explicit Collectives(const RunEnvironment& env);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  // Live recovery: retires the process group (aborted, kept idle: a thread of it may still wait
  // on a gone peer, and its destructor would wait for that) and builds one for `env`'s world,
  // through its store. Throws CollectiveFailure.
  void rebuild(const RunEnvironment& env);
  // Callable from any thread: fails the group's pending and later collectives at once, here
  // and at the peers' ends (Gloo: the group's sockets are shut down, as c10d has no abort for
  // it; NCCL: ProcessGroupNCCL::abort). A group being built is aborted as well. Until rebuild()
  // every collective throws CollectiveFailure.
  void abort();

  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  torch::Device device() const { return device_; }
  // Whether collectives go through a backend (false only for a world of one on CPU, where every
  // collective is a no-op). Gradients need reducing exactly when this is true.
  bool distributed() const { return static_cast<bool>(backend_); }
  // "nccl", "gloo" or "none", for the start-up line.
  const char* backend_name() const { return backend_name_; }

  // Sum over ranks, asynchronously; the result lands in `tensor` once the work completes.
  c10::intrusive_ptr<c10d::Work> start_allreduce_sum(torch::Tensor& tensor);
  void wait(const c10::intrusive_ptr<c10d::Work>& work);
  void allreduce_sum(torch::Tensor& tensor);  // synchronous
  void allreduce_max(torch::Tensor& tensor);
  // Overwrites every tensor with rank 0's values (coalesced into one flat transfer).
  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors);
  // The same from `root`; tensors of different dtypes travel as one transfer per dtype.
  void broadcast_from(int64_t root, const std::vector<torch::Tensor>& tensors);
  void barrier();
  // Ends the process group once every rank agreed training is over (done, nothing to do, or
  // preempted), as PyTorch's destroy_process_group() does:
  // NCCL then releases its communicators instead of warning at exit that nobody did. No
  // collective may follow.
  void shut_down();

 private:
  // store_timeout: for reaching the store and every wait on it.
  void connect(const RunEnvironment& env, std::chrono::seconds store_timeout);
  // Runs a backend call; any failure becomes CollectiveFailure naming `what`.
  template <typename Call>
  auto guarded(const char* what, Call&& call);
  // work.wait(), but leaves it (CollectiveFailure) once abort() was called.
  bool wait_interruptibly(c10d::Work& work);

  int64_t rank_ = 0;
  int64_t world_size_ = 1;
  torch::Device device_{torch::kCPU};
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  const char* backend_name_ = "none";
  // For abort(): the sockets open before the group's store and backend were built, and those
  // they opened (found by difference, socket_set.hpp).
  mutable std::mutex abort_mutex_;
  SocketSet sockets_before_;
  std::set<int> group_sockets_;
  bool aborted_ = false;
  std::atomic<bool> interrupted_{false};  // abort() called: waits leave their work
  // Groups a live recovery replaced: kept (see rebuild()).
  std::vector<c10::intrusive_ptr<c10d::Backend>> retired_backends_;
};

}  // namespace ddprun::train
