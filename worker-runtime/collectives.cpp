#include "collectives.hpp"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// USE_C10D_NCCL comes with a CUDA LibTorch built with NCCL (its torch_cuda target defines it).
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_agreement.hpp"
#include "socket_set.hpp"

namespace ddprun::train {
namespace {

constexpr std::chrono::seconds kStoreTimeout{300};  // torch.distributed's default
// How often a rank blocked in a collective looks whether the group was aborted: a Gloo
// operation waiting for a peer's readiness is not failed by its sockets' shutdown, so the rank
// leaves it instead (the group is then kept, never destroyed, see rebuild()).
constexpr std::chrono::milliseconds kAbortPollInterval{20};
// A live recovery's new world: its members are up already (they are the agents' workers, kept or
// just started), so one that does not come within this is gone; the next world replaces it.
constexpr std::chrono::seconds kLiveStoreTimeout{30};
constexpr std::chrono::minutes kCollectiveTimeout{30};  // kBackendDefaultTimeout

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

c10::intrusive_ptr<c10d::Store> connect_store(const RunEnvironment& env,
                                              std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.timeout = timeout;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.isServer = !env.use_agent_store && env.rank == 0;
  // Every rank counts itself in, as torch.distributed's env:// rendezvous does: the hosting rank
  // waits until all world_size ranks have arrived, and would wait the whole timeout for a rank
  // that never counts itself in.
  options.waitWorkers = !env.use_agent_store;
  options.multiTenant = true;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (!env.use_agent_store) {
      return tcp;
    }
    // PyTorch's env:// rendezvous prefixes the agent's store this way, so one store serves every
    // restart attempt without stale keys.
    return c10::make_intrusive<c10d::PrefixStore>(agent_store_prefix(env), tcp);
  } catch (const std::exception& error) {
    throw std::runtime_error("cannot reach the rendezvous store at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + ": " + error.what());
  }
}

c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                            const RunEnvironment& env) {
  auto options = c10d::ProcessGroupGloo::Options::create(kCollectiveTimeout);
  if (!env.gloo_interface.empty()) {
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForInterface(env.gloo_interface));
  } else if (is_loopback(env.master_addr)) {
    // A single-node job: keep the traffic on the loopback interface.
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(env.rank),
                                                     static_cast<int>(env.world_size), options);
}

// The CUDA devices this rank could use: none without a CUDA LibTorch built with NCCL.
int64_t visible_gpus() {
#ifdef USE_C10D_NCCL
  if (torch::cuda::is_available()) {
    return static_cast<int64_t>(torch::cuda::device_count());
  }
#endif
  return 0;
}

// Counts the ranks that have a GPU through the store (each adds its 0 or 1 before it counts
// itself in, and the last to count itself in opens the gate), then refuses a mixed world.
void agree_on_device(c10d::Store& store, int64_t world_size, const RankDevice& self) {
  const std::string gpu_ranks_key = "ddprun-train/gpu_ranks";
  const std::string gate_key = "ddprun-train/device_counted";
  store.add(gpu_ranks_key, self.has_gpu() ? 1 : 0);
  if (store.add("ddprun-train/ranks_counted", 1) == world_size) {
    store.set(gate_key, std::vector<uint8_t>{'1'});
  }
  store.wait({gate_key});
  if (auto problem = device_disagreement(store.add(gpu_ranks_key, 0), world_size, self)) {
    throw std::runtime_error(*problem);
  }
}

#ifdef USE_C10D_NCCL

c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                                            const RunEnvironment& env) {
  // NCCL binds a communicator to the current device; make it ours before the first collective.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
  if (!env.live_control_path.empty()) {
    // Live recovery: a communicator's error must abort it and keep the process (CleanUpOnly),
    // not tear the process down; abort() ends what is in flight. A user's choice stays.
    ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  }
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = kCollectiveTimeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(env.rank),
                                                     static_cast<int>(env.world_size), options);
}
#endif

// c10d::Backend::shutdown() is missing from the earliest LibTorch 2.x releases: there the
// process group is left to its destructor, as before.
template <typename Group>
void shut_down_backend(Group& backend) {
  if constexpr (requires { backend.shutdown(); }) {
    backend.shutdown();
  }
}

}  // namespace

Collectives::Collectives(const RunEnvironment& env) {
  connect(env, kStoreTimeout);
}

void Collectives::connect(const RunEnvironment& env, std::chrono::seconds store_timeout) {
  rank_ = env.rank;
  world_size_ = env.world_size;
  {
    const std::lock_guard lock(abort_mutex_);
    sockets_before_ = open_sockets();
    group_sockets_.clear();
    aborted_ = false;
    interrupted_.store(false, std::memory_order_release);
  }
  const RankDevice self{env.local_rank, visible_gpus()};
  if (world_size_ > 1) {
    store_ = connect_store(env, store_timeout);
    agree_on_device(*store_, world_size_, self);
  }
#ifdef USE_C10D_NCCL
  if (self.has_gpu()) {
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
    if (world_size_ == 1) {
      store_ = c10::make_intrusive<c10d::HashStore>();  // meets nobody: NCCL's set-up stays local
    }
    backend_ = make_nccl(store_, env);
    backend_name_ = "nccl";
  }
#endif
  if (!backend_ && world_size_ > 1) {
    backend_ = make_gloo(store_, env);
    backend_name_ = "gloo";
  }
  const std::lock_guard lock(abort_mutex_);
  group_sockets_ = sockets_opened_between(sockets_before_, open_sockets());
  if (aborted_) {
    shut_down_sockets(group_sockets_);
    throw CollectiveFailure("the process group was aborted while it was built");
  }
}

void Collectives::rebuild(const RunEnvironment& env) {
  {
    const std::lock_guard lock(abort_mutex_);
    if (!aborted_) {
      shut_down_sockets(group_sockets_);
      aborted_ = true;
    }
  }
  if (backend_) {
    // A thread of the old group may still wait inside an operation this rank left or never
    // waited for (until Gloo's own timeout, 30 min): its destructor would wait for it. It is
    // kept, idle, never destroyed.
    retired_backends_.push_back(std::move(backend_));
  }
  store_.reset();
  backend_name_ = "none";
  try {
    connect(env, kLiveStoreTimeout);
  } catch (const CollectiveFailure&) {
    throw;
  } catch (const std::exception& error) {
    throw CollectiveFailure(std::string("cannot build the process group: ") + error.what());
  }
}

void Collectives::abort() {
  const std::lock_guard lock(abort_mutex_);
  aborted_ = true;
  interrupted_.store(true, std::memory_order_release);
  // What the group (or the one being built) opened so far, store connection included.
  shut_down_sockets(sockets_opened_between(sockets_before_, open_sockets()));
  if (backend_) {
    backend_->abort();  // NCCL's; a no-op for Gloo, whose sockets are down already
  }
}

Collectives::~Collectives() {
  // Groups a live recovery retired: their destructors would wait for threads that may still
  // wait on a gone peer (until Gloo's timeout). The process ends here, so they are let go of
  // without a destructor, on purpose.
  for (auto& backend : retired_backends_) {
    backend.release();
  }
}

template <typename Call>
auto Collectives::guarded(const char* what, Call&& call) {
  try {
    return call();
  } catch (const CollectiveFailure&) {
    throw;
  } catch (const std::exception& error) {
    throw CollectiveFailure(std::string(what) + " failed: " + error.what());
  }
}

bool Collectives::wait_interruptibly(c10d::Work& work) {
  for (;;) {
    if (work.isCompleted()) {
      return work.wait();  // its result, or its error
    }
    if (interrupted_.load(std::memory_order_acquire)) {
      throw CollectiveFailure("abandoned: the process group was aborted");
    }
    try {
      return work.wait(kAbortPollInterval);  // returns as soon as the work completes
    } catch (const c10::Error&) {
      // This slice timed out, or the work failed: the loop's next look tells which (a work
      // that completed meanwhile gives its own result or error).
    }
  }
}

c10::intrusive_ptr<c10d::Work> Collectives::start_allreduce_sum(torch::Tensor& tensor) {
  if (!backend_) {
    return {};
  }
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;  // Gloo has no AVG: sum, then divide
  return guarded("all-reduce", [&] { return backend_->allreduce(tensors, options); });
}

void Collectives::wait(const c10::intrusive_ptr<c10d::Work>& work) {
  if (work) {
    guarded("all-reduce", [&] { return wait_interruptibly(*work); });
  }
}

void Collectives::allreduce_sum(torch::Tensor& tensor) {
  wait(start_allreduce_sum(tensor));
}

void Collectives::allreduce_max(torch::Tensor& tensor) {
  if (!backend_) {
    return;
  }
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  guarded("all-reduce (max)",
          [&] { return wait_interruptibly(*backend_->allreduce(tensors, options)); });
}

void Collectives::broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) {
  broadcast_from(0, tensors);
}

void Collectives::broadcast_from(int64_t root, const std::vector<torch::Tensor>& tensors) {
  if (!backend_ || tensors.empty()) {
    return;
  }
  torch::NoGradGuard no_grad;
  // One flat transfer per dtype, in the order the dtypes first appear.
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < tensors.size(); ++k) {
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& members) {
      return tensors[members.front()].scalar_type() == tensors[k].scalar_type();
    });
    if (group == groups.end()) {
      groups.push_back({k});
    } else {
      group->push_back(k);
    }
  }
  for (const auto& members : groups) {
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(members.size());
    for (const auto k : members) {
      flat_parts.push_back(tensors[k].detach().reshape({-1}));
    }
    std::vector<torch::Tensor> flat{torch::cat(flat_parts)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    guarded("broadcast", [&] { return wait_interruptibly(*backend_->broadcast(flat, options)); });
    int64_t offset = 0;
    for (const auto k : members) {
      const auto& t = tensors[k];
      const int64_t n = t.numel();
      t.detach().copy_(flat[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

void Collectives::barrier() {
  if (!backend_) {
    return;
  }
  auto token = torch::zeros({1}, torch::TensorOptions().device(device_));
  allreduce_sum(token);
}

void Collectives::shut_down() {
  if (backend_) {
    shut_down_backend(*backend_);
  }
}

}  // namespace ddprun::train
