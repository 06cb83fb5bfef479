// DDP from C++ with real sockets: two ranks (threads of this process, each with its own TCPStore
// client and ProcessGroupGloo) against a c10d TCPStore server hosted here, as an agent would.
#include <catch2/catch.hpp>
#include <exception>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "collectives.hpp"
#include "gpt_model.hpp"
#include "gradient_reducer.hpp"
#include "snapshot_state.hpp"

using namespace ddprun::train;

namespace {

constexpr int64_t kBatch = 4;  // per rank
const GptShape kShape{{13, 16, 2, 4, 32}, 0.0, 0.0, 0.0};

c10::intrusive_ptr<c10d::TCPStore> host_store() {
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

RunEnvironment rank_env(int64_t rank, int64_t port, int64_t attempt) {
  RunEnvironment env;
  env.rank = rank;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.use_agent_store = true;
  env.restart_count = attempt;
  return env;
}

std::vector<torch::Tensor> snapshot_of(const Gpt& model) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : model->parameters()) {
    copies.push_back(p.detach().clone());
  }
  return copies;
}

// Runs `body(rank)` on two threads and rethrows the first failure.
template <typename Body>
void run_two_ranks(Body body) {
  // The first sqrt in a process initializes MKL's vector math lazily. When two rank threads of
  // this one process got there together, about 1 run in 20 had one rank's first AdamW step
  // compute its denominators with a relative error near 3e-4, and the replicas parted by a few
  // dozen ulps. Real ranks are processes of their own, each issuing its ops from one thread, so
  // they never race on it; the test warms the library up here, before its ranks start.
  torch::ones({16}).sqrt();
  std::exception_ptr failures[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      try {
        body(r);
      } catch (...) {
        failures[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (auto& f : failures) {
    if (f) {
      std::rethrow_exception(f);
    }
  }
}

}  // namespace

TEST_CASE("2 ranks at batch b average to the gradient of 1 rank at 2b; replicas stay identical",
          "[ddp]") {
  auto store = host_store();
  const int64_t port = store->getPort();
  torch::manual_seed(99);
  const auto global_batch = torch::randint(kShape.vocab_size, {2 * kBatch, 17}, torch::kLong);

  // Reference: one process, the whole batch, rank 0's initial weights (seed + 0).
  torch::manual_seed(1000);
  Gpt reference(kShape);
  const auto inputs = global_batch.narrow(1, 0, 16);
  const auto targets = global_batch.narrow(1, 1, 16);
  language_model_loss(reference->forward(inputs), targets).backward();

  std::vector<torch::Tensor> after_broadcast[2], grads[2], after_steps[2];
  size_t buckets = 0;
  run_two_ranks([&](int rank) {
    Collectives collectives(rank_env(rank, port, 0));
    // Different initial weights per rank, as minGPT-ddp has; the broadcast must fix that.
    Gpt model = [&] {
      static std::mutex seed_lock;  // the default generator is process-wide
      std::lock_guard<std::mutex> lock(seed_lock);
      torch::manual_seed(static_cast<uint64_t>(1000 + rank));
      return Gpt(kShape);
    }();
    std::vector<torch::Tensor> state = model->parameters();
    for (const auto& b : model->buffers()) {
      state.push_back(b);
    }
    collectives.broadcast_from_rank0(state);
    after_broadcast[rank] = snapshot_of(model);

    auto parameters = model->parameters();
    GradientReducer reducer(parameters, collectives);
    if (rank == 0) {
      buckets = reducer.bucket_count();
    }
    const auto mine = global_batch.narrow(0, rank * kBatch, kBatch);
    reducer.prepare_for_backward();
    language_model_loss(model->forward(mine.narrow(1, 0, 16)), mine.narrow(1, 1, 16)).backward();
    reducer.finish();
    for (const auto& p : parameters) {
      grads[rank].push_back(p.grad().clone());
    }

    // A few optimizer steps on different data per rank keep the replicas bit-identical.
    const auto groups = optimizer_parameter_groups(*model);
    auto optimizer = make_adamw(*model, groups, 1e-3, 0.1);
    auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(50 + rank));
    for (int step = 0; step < 3; ++step) {
      const auto batch = torch::randint(kShape.vocab_size, {kBatch, 17}, generator, torch::kLong);
      optimizer->zero_grad();
      reducer.prepare_for_backward();
      language_model_loss(model->forward(batch.narrow(1, 0, 16)), batch.narrow(1, 1, 16))
          .backward();
      reducer.finish();
      optimizer->step();
    }
    after_steps[rank] = snapshot_of(model);
  });

  CHECK(buckets >= 1);
  const auto reference_params = reference->parameters();
  REQUIRE(after_broadcast[0].size() == reference_params.size());
  for (size_t k = 0; k < reference_params.size(); ++k) {
    INFO("parameter " << k);
    CHECK(torch::equal(after_broadcast[0][k], after_broadcast[1][k]));
    CHECK(torch::equal(after_broadcast[0][k], reference_params[k].detach()));
    CHECK(torch::equal(grads[0][k], grads[1][k]));
    CHECK(torch::allclose(grads[0][k], reference_params[k].grad(), 1e-4, 1e-6));
    CHECK(torch::equal(after_steps[0][k], after_steps[1][k]));
  }
}

TEST_CASE("several buckets launch in order and average correctly", "[ddp]") {
  // Known gradients: rank r's loss is (r + 1) * sum(w), so the average is 1.5 everywhere.
  auto store = host_store();
  const int64_t port = store->getPort();
  std::vector<torch::Tensor> results[2];
  size_t bucket_counts[2] = {0, 0};
  run_two_ranks([&](int rank) {
    Collectives collectives(rank_env(rank, port, 1));
    std::vector<torch::Tensor> params;
    for (int k = 0; k < 6; ++k) {
      params.push_back(torch::zeros({300000}, torch::requires_grad()));  // 1.2 MB each
    }
    GradientReducer reducer(params, collectives);
    bucket_counts[rank] = reducer.bucket_count();
    reducer.prepare_for_backward();
    torch::Tensor loss = torch::zeros({});
    for (auto& p : params) {
      loss = loss + p.sum() * static_cast<double>(rank + 1);
    }
    loss.backward();
    reducer.finish();
    for (auto& p : params) {
      results[rank].push_back(p.grad().clone());
    }
  });
  // The last tensor alone fills the 1 MiB first bucket; the other five share a 25 MiB one.
  CHECK(bucket_counts[0] == 2);
  CHECK(bucket_counts[1] == 2);
  for (int r = 0; r < 2; ++r) {
    for (const auto& g : results[r]) {
      CHECK(torch::allclose(g, torch::full_like(g, 1.5)));
    }
  }
}
