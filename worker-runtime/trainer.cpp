#include "trainer.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "char_corpus.hpp"
#include "collectives.hpp"
#include "distributed_sampler.hpp"
#include "gpt_model.hpp"
#include "gradient_reducer.hpp"
#include "progress_heartbeat.hpp"
#include "progress_report.hpp"
#include "snapshot_io.hpp"
#include "snapshot_state.hpp"

namespace ddprun::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Dropout randomness is re-derived from (seed, epoch, step, rank) before every step, so a run
// resumed at any step boundary draws exactly what the uninterrupted run drew, without having to
// save generator states.
uint64_t step_seed(int64_t seed, int64_t epoch, int64_t step, int64_t rank) {
  uint64_t x = static_cast<uint64_t>(seed);
  for (const auto v : {epoch, step, rank}) {
    x ^= static_cast<uint64_t>(v) + 0x9E3779B97F4A7C15ULL + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
  }
  return x >> 1;  // keep it in int64 range for manual_seed
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto contiguous = t.contiguous();
  const auto* data = contiguous.data_ptr<int64_t>();
  return {data, data + contiguous.numel()};
}

// Permutation of [0, n) from a generator seeded with `seed`, as torch.randperm(n, generator=g).
std::vector<int64_t> seeded_permutation(int64_t n, int64_t seed) {
  auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  return to_vector(torch::randperm(n, generator, torch::TensorOptions().dtype(torch::kLong)));
}

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class BatchBuilder {
 public:
  BatchBuilder(const CharCorpus& corpus, torch::Device device)
      : tokens_(torch::tensor(corpus.tokens, torch::kLong)),
        offsets_(torch::arange(corpus.block_size + 1, torch::kLong).unsqueeze(0)),
        device_(device) {}

  // `samples` are sample ids: window [id, id + block_size].
  Batch build(const std::vector<int64_t>& samples) const {
    const auto starts = torch::tensor(samples, torch::kLong).unsqueeze(1);
    const auto windows = tokens_.index({starts + offsets_});
    const int64_t length = offsets_.size(1) - 1;
    return {windows.narrow(1, 0, length).to(device_), windows.narrow(1, 1, length).to(device_)};
  }

 private:
  torch::Tensor tokens_;
  torch::Tensor offsets_;
  torch::Device device_;
};

std::vector<int64_t> batch_samples(const std::vector<int64_t>& positions,
                                   const std::vector<int64_t>& split, int64_t step,
                                   int64_t batch_size) {
  const auto begin = static_cast<size_t>(step * batch_size);
  const auto end = std::min(positions.size(), begin + static_cast<size_t>(batch_size));
  std::vector<int64_t> samples;
  samples.reserve(end - begin);
  for (size_t k = begin; k < end; ++k) {
    samples.push_back(split[static_cast<size_t>(positions[k])]);
  }
  return samples;
}

std::vector<int64_t> identity_order(size_t n) {
  std::vector<int64_t> order(n);
  for (size_t k = 0; k < n; ++k) {
    order[k] = static_cast<int64_t>(k);
  }
  return order;
}

class MetricsSink {
 public:
  explicit MetricsSink(const std::string& path) {
    if (!path.empty()) {
      file_.emplace(path, std::ios::app);
      if (!*file_) {
        throw ConfigError("cannot open the metrics file " + path);
      }
    }
  }
  void write(const std::string& line) {
    if (file_) {
      *file_ << line << '\n' << std::flush;
    }
  }

 private:
  std::optional<std::ofstream> file_;
};

}  // namespace

TrainOutcome run_training(const TrainerInputs& inputs, std::ostream& out) {
  const auto& config = inputs.config;
  const auto& trainer = config.trainer;
  const auto run_start = Clock::now();

  const auto corpus = make_char_corpus(inputs.corpus_text, config.data.truncate,
                                       config.data.block_size, inputs.corpus_name);
  const auto split = split_samples(seeded_permutation(corpus.sample_count(), trainer.seed),
                                   config.data.train_split);
  if (split.train.empty() || split.test.empty()) {
    throw ConfigError(inputs.corpus_name + ": " + std::to_string(corpus.sample_count()) +
                      " samples are too few for a train/test split of " +
                      std::to_string(config.data.train_split));
  }

  Collectives collectives(inputs.env);
  const int64_t rank = collectives.rank();
  const int64_t world = collectives.world_size();
  const bool leader = rank == 0;
  auto say = [&](const std::string& line) {
    if (leader) {
      out << line << '\n' << std::flush;
    }
  };

  GptShape shape{{static_cast<int64_t>(corpus.vocabulary.size()), config.data.block_size,
                  config.gpt.n_layer, config.gpt.n_head, config.gpt.n_embd},
                 config.gpt.embd_pdrop,
                 config.gpt.resid_pdrop,
                 config.gpt.attn_pdrop};
  // Ranks initialise differently on purpose (as minGPT-ddp's do); the broadcast below makes
  // rank 0's weights everyone's.
  torch::manual_seed(static_cast<uint64_t>(trainer.seed + rank));
  Gpt model(shape);
  model->to(collectives.device());
  const auto groups = optimizer_parameter_groups(*model);
  auto optimizer =
      make_adamw(*model, groups, config.optimizer.learning_rate, config.optimizer.weight_decay);

  TrainingPosition position;
  position.world_size = world;
  position.seed = trainer.seed;
  const auto& snapshot_path = trainer.snapshot_path;
  MetricsSink metrics(leader ? trainer.metrics_path : std::string());
  if (std::filesystem::exists(snapshot_path)) {
    const auto load_start = Clock::now();
    const auto restored = restore_snapshot(read_snapshot_file(snapshot_path), snapshot_path, *model,
                                           *optimizer, groups);
    position.finished_epoch = restored.position.finished_epoch;
    position.steps_into_epoch = restored.position.steps_into_epoch;
    if (restored.position.steps_into_epoch > 0 && restored.position.world_size != world) {
      say("resume: the snapshot was taken mid-epoch with " +
          std::to_string(restored.position.world_size) + " ranks; with " + std::to_string(world) +
          " the sampler differs, so epoch " + std::to_string(restored.position.finished_epoch + 1) +
          " restarts from its beginning");
      position.steps_into_epoch = 0;
    }
    say("resumed from " + snapshot_path + ": finished epoch " +
        std::to_string(position.finished_epoch) + ", " + std::to_string(position.steps_into_epoch) +
        " steps into the next (loaded in " + std::to_string(seconds_since(load_start)) + " s)" +
        (restored.has_resume_record
             ? std::string()
             : "; written by minGPT-ddp or another PyTorch program, so the next epoch starts "
               "from its beginning"));
    // As minGPT-ddp's optimizer.load_state_dict: the snapshot's hyperparameters win.
    if (restored.learning_rate != config.optimizer.learning_rate ||
        restored.weight_decay != config.optimizer.weight_decay) {
      std::ostringstream note;
      note << "resume: learning_rate " << restored.learning_rate << " and weight_decay "
           << restored.weight_decay
           << " come from the snapshot's optimizer state, as in minGPT-ddp (the configuration's "
           << config.optimizer.learning_rate << " and " << config.optimizer.weight_decay
           << " apply to fresh starts only)";
      say(note.str());
    }
    metrics.write(resume_json_line(position.finished_epoch, position.steps_into_epoch,
                                   seconds_since(load_start)));
  }
  // All ranks must resume from the same place (a snapshot missing on one node would split them).
  {
    auto check =
        torch::tensor({position.finished_epoch, position.steps_into_epoch, -position.finished_epoch,
                       -position.steps_into_epoch},
                      torch::TensorOptions().dtype(torch::kLong).device(collectives.device()));
    collectives.allreduce_max(check);
    const auto v = to_vector(check.cpu());
    if (v[0] != -v[2] || v[1] != -v[3]) {
      throw SnapshotError("snapshot " + snapshot_path +
                          ": ranks disagree on the resume point (is the file visible on every "
                          "node?)");
    }
  }

  std::vector<torch::Tensor> state_tensors;
  for (const auto& p : model->parameters()) {
    state_tensors.push_back(p);
  }
  for (const auto& b : model->buffers()) {
    state_tensors.push_back(b);
  }
  collectives.broadcast_from_rank0(state_tensors);

  std::vector<torch::Tensor> parameters = model->parameters();
  std::optional<GradientReducer> reducer;
  if (collectives.distributed()) {
    reducer.emplace(parameters, collectives);
  }

  const BatchBuilder batches(corpus, collectives.device());
  const int64_t train_per_rank = samples_per_rank(static_cast<int64_t>(split.train.size()), world);
  const int64_t steps_per_epoch =
      batches_per_epoch(train_per_rank, trainer.batch_size, trainer.steps_per_epoch);
  const int64_t test_per_rank = samples_per_rank(static_cast<int64_t>(split.test.size()), world);
  const int64_t eval_steps =
      batches_per_epoch(test_per_rank, trainer.batch_size, trainer.eval_batches);
  const auto test_positions = rank_positions(identity_order(split.test.size()), world, rank);

  int64_t parameter_count = 0;
  for (const auto& p : parameters) {
    parameter_count += p.numel();
  }
  say("ddprun-train: " + std::to_string(world) + " rank(s) on " + collectives.device().str() +
      " (collectives: " + collectives.backend_name() + "), " +
      std::to_string(torch::get_num_threads()) + " thread(s) each; model " +
      std::to_string(parameter_count) + " parameters (" + std::to_string(shape.n_layer) +
      " layers, " + std::to_string(shape.n_head) + " heads, " + std::to_string(shape.n_embd) +
      " wide), vocab " + std::to_string(shape.vocab_size) + ", block " +
      std::to_string(shape.block_size) + "; data " + inputs.corpus_name + ": " +
      std::to_string(split.train.size()) + " train / " + std::to_string(split.test.size()) +
      " test samples; " + std::to_string(steps_per_epoch) + " steps per epoch of " +
      std::to_string(trainer.batch_size) + " per rank; snapshot " + snapshot_path);
  if (position.finished_epoch >= trainer.max_epochs) {
    say("nothing to do: " + snapshot_path + " already finished epoch " +
        std::to_string(position.finished_epoch) + " of " + std::to_string(trainer.max_epochs) +
        " (raise trainer_config.max_epochs to train further, or delete the snapshot)");
    collectives.shut_down();
    return TrainOutcome::kCompleted;
  }

  auto save = [&](const TrainingPosition& at) {
    if (leader) {
      const auto start = Clock::now();
      const auto parts = make_snapshot(*model, *optimizer, groups, at);
      write_snapshot_file(snapshot_path, parts.content, parts.resume_record);
      const double took = seconds_since(start);
      say("snapshot: wrote " + snapshot_path + " (finished epoch " +
          std::to_string(at.finished_epoch) +
          (at.steps_into_epoch > 0
               ? ", " + std::to_string(at.steps_into_epoch) + " steps into the next"
               : std::string()) +
          ") in " + std::to_string(took) + " s");
      metrics.write(snapshot_json_line(at.finished_epoch, at.steps_into_epoch, took));
    }
    // Keep the ranks together so none exits (or races ahead) before the file is whole.
    collectives.barrier();
  };

  const int64_t tokens_per_step = trainer.batch_size * shape.block_size * world;
  const int64_t steps_total =
      (trainer.max_epochs - position.finished_epoch) * steps_per_epoch - position.steps_into_epoch;
  int64_t steps_done = 0;
  double train_seconds = 0.0;
  // What a step line and an epoch summary both report, as of now.
  const auto progress_at = [&](int64_t epoch, int64_t step) {
    ProgressSample sample;
    sample.epoch = epoch;
    sample.max_epochs = trainer.max_epochs;
    sample.step = step;
    sample.steps_in_epoch = steps_per_epoch;
    sample.global_step = steps_done;
    sample.elapsed_seconds = seconds_since(run_start);
    sample.eta_seconds = estimate_eta(train_seconds, steps_done, steps_total - steps_done);
    return sample;
  };
  ProgressHeartbeat heartbeat = ProgressHeartbeat::from_environment();  // --watchdog-timeout
  model->train();
  for (int64_t epoch = position.finished_epoch + 1; epoch <= trainer.max_epochs; ++epoch) {
    // DistributedSampler(shuffle=True, seed) with set_epoch(epoch): same order on every rank.
    const auto order =
        seeded_permutation(static_cast<int64_t>(split.train.size()), trainer.seed + epoch);
    const auto positions = rank_positions(order, world, rank);
    const int64_t first_step = epoch == position.finished_epoch + 1 ? position.steps_into_epoch : 0;
    double epoch_loss_sum = 0.0;
    int64_t epoch_steps = 0;
    auto window_start = Clock::now();
    int64_t window_steps = 0;
    double last_loss = 0.0;
    for (int64_t step = first_step; step < steps_per_epoch; ++step) {
      const auto step_start = Clock::now();
      torch::manual_seed(step_seed(trainer.seed, epoch, step, rank));
      const auto batch =
          batches.build(batch_samples(positions, split.train, step, trainer.batch_size));
      const auto loss = language_model_loss(model->forward(batch.inputs), batch.targets);
      optimizer->zero_grad();
      if (reducer) {
        reducer->prepare_for_backward();
      }
      loss.backward();
      if (reducer) {
        reducer->finish();
      }
      torch::nn::utils::clip_grad_norm_(parameters, trainer.grad_norm_clip);
      optimizer->step();
      heartbeat.beat();

      // One small collective per step: the loss for the log and the preemption vote, so every
      // rank stops after the same step.
      const bool stop_here = inputs.stop_requested && inputs.stop_requested();
      // Collectives work on the backend's device (NCCL: the GPU); the reading is on the CPU.
      auto vote = torch::tensor({loss.item<double>(), stop_here ? 1.0 : 0.0},
                                torch::TensorOptions().dtype(torch::kDouble))
                      .to(collectives.device());
      collectives.allreduce_sum(vote);
      vote = vote.cpu();
      const auto votes = vote.accessor<double, 1>();
      last_loss = votes[0] / static_cast<double>(world);
      epoch_loss_sum += last_loss;
      ++epoch_steps;
      ++steps_done;
      ++window_steps;
      train_seconds += seconds_since(step_start);

      if (leader && ((step + 1) % trainer.log_every == 0 || step + 1 == steps_per_epoch)) {
        const double window = seconds_since(window_start);
        ProgressSample sample = progress_at(epoch, step + 1);
        sample.train_loss = last_loss;
        sample.tokens_per_second =
            window > 0 ? static_cast<double>(window_steps * tokens_per_step) / window : 0.0;
        say(progress_line(sample));
        metrics.write(metrics_json_line(sample, "step"));
        window_start = Clock::now();
        window_steps = 0;
      }
      if (votes[1] > 0.0) {
        TrainingPosition at = position;
        at.finished_epoch = epoch - 1;
        at.steps_into_epoch = step + 1;
        say("preempted: stopping after epoch " + std::to_string(epoch) + " step " +
            std::to_string(step + 1));
        save(at);
        collectives.shut_down();
        return TrainOutcome::kStopped;
      }
    }

    // Evaluation: dropout off, DistributedSampler(shuffle=False), loss averaged over all ranks.
    model->eval();
    double eval_loss_sum = 0.0;
    double eval_tokens = 0.0;
    {
      torch::NoGradGuard no_grad;
      for (int64_t step = 0; step < eval_steps; ++step) {
        const auto batch =
            batches.build(batch_samples(test_positions, split.test, step, trainer.batch_size));
        const auto loss = language_model_loss(model->forward(batch.inputs), batch.targets);
        const auto tokens = static_cast<double>(batch.targets.numel());
        eval_loss_sum += loss.item<double>() * tokens;
        eval_tokens += tokens;
      }
    }
    model->train();
    auto eval =
        torch::tensor({eval_loss_sum, eval_tokens}, torch::kDouble).to(collectives.device());
    collectives.allreduce_sum(eval);
    eval = eval.cpu();
    const auto sums = eval.accessor<double, 1>();

    ProgressSample summary = progress_at(epoch, steps_per_epoch);
    summary.train_loss = epoch_steps > 0 ? epoch_loss_sum / static_cast<double>(epoch_steps) : 0.0;
    summary.eval_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    summary.tokens_per_second =
        train_seconds > 0 ? static_cast<double>(steps_done * tokens_per_step) / train_seconds : 0.0;
    say(epoch_summary_line(summary));
    metrics.write(metrics_json_line(summary, "epoch"));

    if (epoch % trainer.save_every == 0 || epoch == trainer.max_epochs) {
      TrainingPosition at = position;
      at.finished_epoch = epoch;
      at.steps_into_epoch = 0;
      save(at);
    }
  }
  say("done: " + std::to_string(trainer.max_epochs) + " epochs in " +
      format_duration(seconds_since(run_start)));
  collectives.shut_down();
  return TrainOutcome::kCompleted;
}

}  // namespace ddprun::train
