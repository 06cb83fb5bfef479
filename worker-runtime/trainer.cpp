#include "trainer.hpp"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "char_corpus.hpp"
#include "collectives.hpp"
#include "distributed_sampler.hpp"
#include "elapsed.hpp"
#include "generation.hpp"
#include "gpt_model.hpp"
#include "gradient_clipping.hpp"
#include "gradient_reducer.hpp"
#include "live_state.hpp"
#include "live_watch.hpp"
#include "loss_scaler.hpp"
#include "memory_peak.hpp"
#include "mixed_precision.hpp"
#include "progress_heartbeat.hpp"
#include "progress_report.hpp"
#include "snapshot_io.hpp"
#include "snapshot_keeper.hpp"
#include "snapshot_state.hpp"

namespace ddprun::train {
namespace {

// The ranks agree on whether to stop (SIGTERM) at vote steps only: each vote reads a result from
// the device, which is the one host synchronisation of the loop. Votes come at every log line
// and often enough that a stop lands within about this long.
constexpr double kSecondsBetweenVotes = 0.5;

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

  // `samples` are sample ids: window [id, id + block_size]. On a GPU the windows go through
  // pinned memory and are copied without blocking, so the host queues the step's kernels
  // behind the copy instead of waiting for it.
  Batch build(const std::vector<int64_t>& samples) const {
    const auto starts = torch::tensor(samples, torch::kLong).unsqueeze(1);
    auto windows = tokens_.index({starts + offsets_});
    if (device_.is_cuda()) {
      windows = windows.pin_memory().to(device_, /*non_blocking=*/true);
    }
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

// The metrics file the user asked for (a file that cannot be opened stops the run), and the
// agent's copy for its job page (one that cannot be opened is left out: the page loses its
// curves, the training goes on).
class MetricsSink {
 public:
  MetricsSink(const std::string& path, const std::string& agent_path) {
    if (!path.empty()) {
      file_.emplace(path, std::ios::app);
      if (!*file_) {
        throw ConfigError("cannot open the metrics file " + path);
      }
    }
    if (!agent_path.empty()) {
      agent_file_.emplace(agent_path, std::ios::app);
      if (!*agent_file_) {
        agent_file_.reset();
      }
    }
  }
  void write(const std::string& line) {
    for (auto* file : {&file_, &agent_file_}) {
      if (*file) {
        **file << line << '\n' << std::flush;
      }
    }
  }

 private:
  std::optional<std::ofstream> file_;
  std::optional<std::ofstream> agent_file_;
};

CharCorpus corpus_of(const TrainerInputs& inputs) {
  return make_char_corpus(inputs.corpus_text, inputs.config.data.truncate,
                          inputs.config.data.block_size, inputs.corpus_name);
}

SampleSplit split_of(const CharCorpus& corpus, const TrainConfig& config,
                     const std::string& corpus_name) {
  auto split = split_samples(seeded_permutation(corpus.sample_count(), config.trainer.seed),
                             config.data.train_split);
  if (split.train.empty() || split.test.empty()) {
    throw ConfigError(corpus_name + ": " + std::to_string(corpus.sample_count()) +
                      " samples are too few for a train/test split of " +
                      std::to_string(config.data.train_split));
  }
  return split;
}

GptShape shape_of(const CharCorpus& corpus, const TrainConfig& config) {
  return GptShape{{static_cast<int64_t>(corpus.vocabulary.size()), config.data.block_size,
                   config.gpt.n_layer, config.gpt.n_head, config.gpt.n_embd},
                  config.gpt.embd_pdrop,
                  config.gpt.resid_pdrop,
                  config.gpt.attn_pdrop};
}

// What the ranks learn from one vote: the loss of the last step (their mean), whether any rank
// wants to stop, and the slowest rank's pace, from which they agree when to vote next.
struct Vote {
  double loss = 0.0;
  bool stop = false;
  double seconds_per_step = 0.0;
};

// minGPT-ddp's Trainer, step by step: load snapshot, run batch, run epoch, evaluate, save
// snapshot. One rank of the job.
class Trainer {
 public:
  Trainer(const TrainerInputs& inputs, std::ostream& out);
  TrainOutcome run();

 private:
  void say(const std::string& line) const;
  // Every rank's own line (live recovery: each says where it stands).
  void tell(const std::string& line) const;
  void load_snapshot();
  // The numbers that follow from the world (rank, world size): data shards, evaluation, the
  // snapshot keeper (rank 0), the gradient reducer.
  void apply_world();
  // Live recovery (--recovery live). The first world: the state from a peer that holds it, else
  // from the snapshot as at any start. Later ones: see move_to_next_world.
  void join_first_world();
  // Whoever holds the most advanced state sends it to every rank; false when nobody holds any.
  bool synchronize_state(bool holds_state);
  // The collectives broke (reason): abort them, wait for the agent's next world, build its
  // process group and take the state. nullopt: training goes on; else the run ends so.
  std::optional<TrainOutcome> move_to_next_world(const std::string& reason);
  TrainOutcome train_epochs();
  void check_ranks_resume_together();
  void announce() const;
  std::string precision_text() const;
  // Forward, backward, gradient averaging, clipping and the optimizer step; returns the loss
  // (on the device, not read).
  torch::Tensor run_batch(const Batch& batch);
  torch::Tensor loss_of(const Batch& batch);
  int64_t epoch_length(int64_t steps_done, int64_t cursor) const;
  std::vector<int64_t> step_samples(const std::vector<int64_t>& order, int64_t cursor) const;
  // nullopt: the epoch ran to its end; else the ranks agreed to stop.
  std::optional<TrainOutcome> run_epoch(int64_t epoch);
  void finish_epoch(int64_t epoch, const torch::Tensor& train_loss_sum, int64_t epoch_steps);
  Vote vote(const torch::Tensor& last_loss);
  // Returns the (eval loss sum, eval tokens, train loss sum) of all ranks.
  std::vector<double> evaluate(const torch::Tensor& train_loss_sum);
  // Rank 0 takes a snapshot (SnapshotKeeper); kLast also keeps every rank until it is written.
  void save_snapshot(const TrainingPosition& at, SnapshotKeeper::Kind kind);
  bool epoch_snapshot_due(int64_t epoch) const;
  // trainer_config.stop_after: at (epoch, steps done in it), every rank alike, no vote needed.
  bool stop_due(int64_t epoch, int64_t steps_done) const;
  TrainOutcome stop_as_asked(int64_t epoch, int64_t steps_done, int64_t cursor);
  // After each step: a snapshot inside the epoch when save_every_steps/seconds says so.
  void after_step(int64_t epoch, int64_t step);
  // Rank 0 prints what the model writes now, so that a run shows what it learned.
  void print_sample(int64_t epoch);
  ProgressSample progress_at(int64_t epoch, int64_t step) const;

  const TrainerInputs& inputs_;
  const TrainerConfig& trainer_;
  std::ostream& out_;
  const Clock::time_point run_start_ = Clock::now();
  const CharCorpus corpus_;
  const SampleSplit split_;
  Collectives collectives_;
  std::unique_ptr<LiveWatch> live_;  // --recovery live; after collectives_, which it aborts
  uint64_t generation_ = 0;          // the live world's round
  int64_t rank_;
  int64_t world_;
  const GptShape shape_;
  const PrecisionPlan precision_;
  const std::optional<at::ScalarType> autocast_dtype_;
  Gpt model_{nullptr};
  ParameterGroups groups_;
  std::unique_ptr<FusedAdamW> optimizer_;
  std::optional<LossScaler> scaler_;
  std::vector<torch::Tensor> parameters_;
  std::optional<GradientReducer> reducer_;
  MetricsSink metrics_;
  TrainingPosition position_;
  LivePosition committed_;  // after the last step every rank applied
  const BatchBuilder batches_;
  int64_t steps_per_epoch_ = 0;
  int64_t eval_steps_ = 0;
  std::vector<int64_t> test_positions_;
  int64_t tokens_per_step_ = 0;
  int64_t steps_total_ = 0;
  int64_t steps_done_ = 0;
  double train_seconds_ = 0.0;
  int64_t steps_between_votes_ = 1;
  ProgressHeartbeat heartbeat_ = ProgressHeartbeat::from_environment();  // --watchdog-timeout
  std::optional<SnapshotKeeper> snapshots_;                              // global rank 0 only
};

Trainer::Trainer(const TrainerInputs& inputs, std::ostream& out)
    : inputs_(inputs),
      trainer_(inputs.config.trainer),
      out_(out),
      corpus_(corpus_of(inputs)),
      split_(split_of(corpus_, inputs.config, inputs.corpus_name)),
      collectives_(inputs.env),
      rank_(collectives_.rank()),
      world_(collectives_.world_size()),
      shape_(shape_of(corpus_, inputs.config)),
      precision_(plan_precision(trainer_.precision, trainer_.use_amp,
                                detect_device_caps(collectives_.device()))),
      autocast_dtype_(autocast_dtype(precision_)),
      metrics_(rank_ == 0 ? trainer_.metrics_path : std::string(),
               rank_ == 0 ? inputs.env.agent_metrics_path : std::string()),
      batches_(corpus_, collectives_.device()) {
  const auto device = collectives_.device();
  apply_matmul_precision(precision_, device);
  // Ranks initialise differently on purpose (as minGPT-ddp's do); the broadcast below makes
  // rank 0's weights everyone's.
  torch::manual_seed(static_cast<uint64_t>(trainer_.seed + rank_));
  model_ = Gpt(shape_);
  model_->to(device);
  groups_ = optimizer_parameter_groups(*model_);
  const auto& optimizer_config = inputs.config.optimizer;
  optimizer_ =
      make_adamw(*model_, groups_, optimizer_config.learning_rate, optimizer_config.weight_decay);
  if (precision_.loss_scaling) {
    scaler_.emplace(device, LossScalerSettings{});
  }
  position_.seed = trainer_.seed;
  apply_world();
  if (!inputs.env.live_control_path.empty()) {
    live_ =
        std::make_unique<LiveWatch>(inputs.env.live_control_path, [this] { collectives_.abort(); });
    generation_ = live_->latest().generation;
    live_->running_in(generation_);
  }
}

void Trainer::apply_world() {
  rank_ = collectives_.rank();
  world_ = collectives_.world_size();
  position_.world_size = world_;
  const int64_t train_per_rank =
      samples_per_rank(static_cast<int64_t>(split_.train.size()), world_);
  steps_per_epoch_ =
      batches_per_epoch(train_per_rank, trainer_.batch_size, trainer_.steps_per_epoch);
  const int64_t test_per_rank = samples_per_rank(static_cast<int64_t>(split_.test.size()), world_);
  eval_steps_ = batches_per_epoch(test_per_rank, trainer_.batch_size, trainer_.eval_batches);
  test_positions_ = rank_positions(identity_order(split_.test.size()), world_, rank_);
  tokens_per_step_ = trainer_.batch_size * shape_.block_size * world_;
  if (rank_ != 0) {
    snapshots_.reset();
  } else if (!snapshots_) {
    snapshots_.emplace(
        trainer_,
        [this](const TrainingPosition& at, HostStaging& staging) {
          return make_snapshot(*model_, *optimizer_, groups_, at, staging);
        },
        [this](const std::string& line) { say(line); },
        [this](const std::string& line) { metrics_.write(line); });
  }
  reducer_.reset();
  parameters_ = model_->parameters();
  if (collectives_.distributed()) {
    reducer_.emplace(parameters_, collectives_);
  }
}

void Trainer::say(const std::string& line) const {
  if (rank_ == 0) {
    out_ << line << '\n' << std::flush;
  }
}

void Trainer::tell(const std::string& line) const {
  out_ << line << '\n' << std::flush;
}

void Trainer::load_snapshot() {
  const auto load_start = Clock::now();
  const auto resumed = restore_newest_usable(
      trainer_.snapshot_path,
      [this](const SnapshotFile& file, const std::string& path) {
        return restore_snapshot(file, path, *model_, *optimizer_, groups_);
      },
      [this](const std::string& line) { say(line); });
  if (resumed) {
    const auto& path = resumed->path;
    const auto& restored = resumed->restored;
    const auto& at = restored.position;
    committed_.finished_epoch = at.finished_epoch;
    committed_.steps_into_epoch = at.steps_into_epoch;
    // Older records count steps only: the cursor follows when the world is the same.
    committed_.samples_into_epoch = at.samples_into_epoch >= 0
                                        ? at.samples_into_epoch
                                        : at.steps_into_epoch * trainer_.batch_size * at.world_size;
    if (at.steps_into_epoch > 0 && at.samples_into_epoch < 0 && at.world_size != world_) {
      say("resume: the snapshot was taken mid-epoch with " + std::to_string(at.world_size) +
          " ranks and records no sample position; with " + std::to_string(world_) +
          " the sampler differs, so epoch " + std::to_string(at.finished_epoch + 1) +
          " restarts from its beginning");
      committed_.steps_into_epoch = 0;
      committed_.samples_into_epoch = 0;
    }
    say("resumed from " + path + ": finished epoch " + std::to_string(committed_.finished_epoch) +
        ", " + std::to_string(committed_.steps_into_epoch) + " steps into the next (loaded in " +
        std::to_string(seconds_since(load_start)) + " s)" +
        (restored.has_resume_record
             ? std::string()
             : "; written by minGPT-ddp or another PyTorch program, so the next epoch starts "
               "from its beginning"));
    // As minGPT-ddp's optimizer.load_state_dict: the snapshot's hyperparameters win.
    const auto& optimizer_config = inputs_.config.optimizer;
    if (restored.learning_rate != optimizer_config.learning_rate ||
        restored.weight_decay != optimizer_config.weight_decay) {
      std::ostringstream note;
      note << "resume: learning_rate " << restored.learning_rate << " and weight_decay "
           << restored.weight_decay
           << " come from the snapshot's optimizer state, as in minGPT-ddp (the configuration's "
           << optimizer_config.learning_rate << " and " << optimizer_config.weight_decay
           << " apply to fresh starts only)";
      say(note.str());
    }
    metrics_.write(resume_json_line(committed_.finished_epoch, committed_.steps_into_epoch,
                                    seconds_since(load_start)));
  }
  check_ranks_resume_together();

  std::vector<torch::Tensor> state_tensors = model_->parameters();
  for (const auto& b : model_->buffers()) {
    state_tensors.push_back(b);
  }
  collectives_.broadcast_from_rank0(state_tensors);
}

// All ranks must resume from the same place (a snapshot missing on one node would split them).
void Trainer::check_ranks_resume_together() {
  auto check =
      torch::tensor({committed_.finished_epoch, committed_.samples_into_epoch,
                     -committed_.finished_epoch, -committed_.samples_into_epoch},
                    torch::TensorOptions().dtype(torch::kLong).device(collectives_.device()));
  collectives_.allreduce_max(check);
  const auto v = to_vector(check.cpu());
  if (v[0] != -v[2] || v[1] != -v[3]) {
    throw SnapshotError("snapshot " + trainer_.snapshot_path +
                        ": ranks disagree on the resume point (is the file visible on every "
                        "node?)");
  }
}

std::string Trainer::precision_text() const {
  return "precision " + std::string(precision_name(precision_.precision)) + " (" +
         precision_.reason + ")";
}

void Trainer::announce() const {
  int64_t parameter_count = 0;
  for (const auto& p : parameters_) {
    parameter_count += p.numel();
  }
  say("ddprun-train: " + std::to_string(world_) + " rank(s) on " + collectives_.device().str() +
      " (collectives: " + collectives_.backend_name() + "), " +
      std::to_string(torch::get_num_threads()) + " thread(s) each; model " +
      std::to_string(parameter_count) + " parameters (" + std::to_string(shape_.n_layer) +
      " layers, " + std::to_string(shape_.n_head) + " heads, " + std::to_string(shape_.n_embd) +
      " wide), vocab " + std::to_string(shape_.vocab_size) + ", block " +
      std::to_string(shape_.block_size) + "; data " + inputs_.corpus_name + ": " +
      std::to_string(split_.train.size()) + " train / " + std::to_string(split_.test.size()) +
      " test samples; " + std::to_string(steps_per_epoch_) + " steps per epoch of " +
      std::to_string(trainer_.batch_size) + " per rank; snapshot " + trainer_.snapshot_path);
  say("ddprun-train: " + precision_text());
}

torch::Tensor Trainer::loss_of(const Batch& batch) {
  const AutocastScope autocast(collectives_.device(), autocast_dtype_);
  // The loss in fp32 on every device (CUDA's autocast would leave bf16 logits to it).
  return language_model_loss(model_->forward(batch.inputs).to(torch::kFloat), batch.targets);
}

torch::Tensor Trainer::run_batch(const Batch& batch) {
  const auto loss = loss_of(batch);
  optimizer_->zero_grad();
  if (reducer_) {
    reducer_->prepare_for_backward();
  }
  (scaler_ ? scaler_->scale(loss) : loss).backward();
  if (reducer_) {
    reducer_->finish();
  }
  std::vector<torch::Tensor> gradients;
  gradients.reserve(parameters_.size());
  for (const auto& p : parameters_) {
    if (p.grad().defined()) {
      gradients.push_back(p.grad());
    }
  }
  // Unscaled before clipping, so the clip sees true gradients (minGPT-ddp clips the scaled ones,
  // pytorch/examples#1196).
  const auto found_inf =
      scaler_ ? std::optional<torch::Tensor>(scaler_->unscale(gradients)) : std::nullopt;
  clip_gradient_norm(gradients, trainer_.grad_norm_clip);
  if (snapshots_) {
    snapshots_->before_update();
  }
  optimizer_->step_unless(found_inf);
  if (scaler_) {
    scaler_->update(*found_inf);
  }
  heartbeat_.beat();
  return loss.detach();
}

Vote Trainer::vote(const torch::Tensor& last_loss) {
  const bool stop_here = inputs_.stop_requested && inputs_.stop_requested();
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(collectives_.device());
  // Whole microseconds, so the sum is exact and every rank derives the same cadence from it.
  const double micros_per_step =
      std::round(1e6 * train_seconds_ / static_cast<double>(steps_done_));
  auto ballot =
      torch::stack({last_loss.to(torch::kDouble), torch::full({}, stop_here ? 1.0 : 0.0, options),
                    torch::full({}, micros_per_step, options)});
  collectives_.allreduce_sum(ballot);
  ballot = ballot.cpu();
  const auto sums = ballot.accessor<double, 1>();
  return {sums[0] / static_cast<double>(world_), sums[1] > 0.0,
          sums[2] / 1e6 / static_cast<double>(world_)};
}

// The epoch's length in this world (the world may have changed inside it: live recovery).
int64_t Trainer::epoch_length(int64_t steps_done, int64_t cursor) const {
  const int64_t length = steps_done + steps_left_in_epoch(static_cast<int64_t>(split_.train.size()),
                                                          cursor, world_, trainer_.batch_size);
  return trainer_.steps_per_epoch > 0 ? std::min(length, trainer_.steps_per_epoch) : length;
}

// This rank's samples for the step at `cursor` of the epoch's `order`.
std::vector<int64_t> Trainer::step_samples(const std::vector<int64_t>& order,
                                           int64_t cursor) const {
  std::vector<int64_t> samples;
  for (const auto k : step_positions(order, cursor, world_, rank_, trainer_.batch_size)) {
    samples.push_back(split_.train[static_cast<size_t>(k)]);
  }
  return samples;
}

std::optional<TrainOutcome> Trainer::run_epoch(int64_t epoch) {
  // DistributedSampler(shuffle=True, seed) with set_epoch(epoch): same order on every rank.
  const auto train_size = static_cast<int64_t>(split_.train.size());
  const auto order = seeded_permutation(train_size, trainer_.seed + epoch);
  const bool resuming = epoch == committed_.finished_epoch + 1;
  const int64_t first_step = resuming ? committed_.steps_into_epoch : 0;
  int64_t cursor = resuming ? committed_.samples_into_epoch : 0;
  steps_per_epoch_ = epoch_length(first_step, cursor);
  if (first_step == 0 && stop_due(epoch, 0)) {
    return stop_as_asked(epoch, 0, 0);
  }
  auto train_loss_sum =
      torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(collectives_.device()));
  int64_t epoch_steps = 0;
  auto window_start = Clock::now();
  auto segment_start = Clock::now();
  int64_t window_steps = 0;
  int64_t steps_since_vote = 0;
  for (int64_t step = first_step; step < steps_per_epoch_; ++step) {
    if (live_ && live_->changed()) {
      throw CollectiveFailure("the agent announced a new world");
    }
    torch::manual_seed(step_seed(trainer_.seed, epoch, step, rank_));
    const auto loss = run_batch(batches_.build(step_samples(order, cursor)));
    // Every rank's gradients are in this step (its all-reduce completed): it is committed.
    cursor += step_share(train_size, cursor, world_, trainer_.batch_size) * world_;
    committed_ = {epoch - 1, step + 1, cursor, committed_.steps_committed + 1};
    train_loss_sum += loss;
    ++epoch_steps;
    ++steps_done_;
    ++window_steps;
    ++steps_since_vote;
    after_step(epoch, step);
    const bool stop = stop_due(epoch, step + 1);
    const bool log_due =
        stop || (step + 1) % trainer_.log_every == 0 || step + 1 == steps_per_epoch_;
    if (!log_due && steps_since_vote < steps_between_votes_) {
      continue;
    }
    // The vote reads from the device, so the time up to here is the steps' true time.
    train_seconds_ += seconds_since(segment_start);
    const auto ballot = vote(loss);
    segment_start = Clock::now();
    steps_since_vote = 0;
    steps_between_votes_ = std::clamp<int64_t>(
        ballot.seconds_per_step > 0.0
            ? static_cast<int64_t>(kSecondsBetweenVotes / ballot.seconds_per_step)
            : 1,
        1, trainer_.log_every);
    if (rank_ == 0 && log_due) {
      const double window = seconds_since(window_start);
      ProgressSample sample = progress_at(epoch, step + 1);
      sample.train_loss = ballot.loss;
      sample.tokens_per_second =
          window > 0 ? static_cast<double>(window_steps * tokens_per_step_) / window : 0.0;
      say(progress_line(sample));
      metrics_.write(metrics_json_line(sample, "step"));
      window_start = Clock::now();
      window_steps = 0;
    }
    if (stop) {
      return stop_as_asked(epoch, step + 1, cursor);
    }
    if (ballot.stop) {
      TrainingPosition at = position_;
      at.finished_epoch = epoch - 1;
      at.steps_into_epoch = step + 1;
      at.samples_into_epoch = cursor;
      say("preempted: stopping after epoch " + std::to_string(epoch) + " step " +
          std::to_string(step + 1));
      save_snapshot(at, SnapshotKeeper::Kind::kLast);
      return TrainOutcome::kStopped;
    }
  }

  finish_epoch(epoch, train_loss_sum, epoch_steps);
  return std::nullopt;
}

// The end of an epoch: evaluation, the summary line and metrics, a sample, the epoch's snapshot.
void Trainer::finish_epoch(int64_t epoch, const torch::Tensor& train_loss_sum,
                           int64_t epoch_steps) {
  const auto sums = evaluate(train_loss_sum);
  ProgressSample summary = progress_at(epoch, steps_per_epoch_);
  summary.train_loss = epoch_steps > 0 ? sums[2] / static_cast<double>(world_ * epoch_steps) : 0.0;
  summary.eval_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  summary.tokens_per_second =
      train_seconds_ > 0 ? static_cast<double>(steps_done_ * tokens_per_step_) / train_seconds_
                         : 0.0;
  const auto peak = memory_peak(collectives_.device());
  summary.peak_memory_bytes = peak.bytes;
  summary.peak_memory_kind = peak.kind;
  say(epoch_summary_line(summary));
  metrics_.write(metrics_json_line(summary, "epoch"));
  if (trainer_.sample_tokens > 0 &&
      (epoch == trainer_.max_epochs ||
       (trainer_.sample_every > 0 && epoch % trainer_.sample_every == 0))) {
    print_sample(epoch);
  }

  if (epoch_snapshot_due(epoch)) {
    TrainingPosition at = position_;
    at.finished_epoch = epoch;
    at.steps_into_epoch = 0;
    at.samples_into_epoch = 0;
    save_snapshot(at, epoch == trainer_.max_epochs ? SnapshotKeeper::Kind::kLast
                                                   : SnapshotKeeper::Kind::kEpoch);
  }
  committed_ = {epoch, 0, 0, committed_.steps_committed};
}

// Evaluation: dropout off, DistributedSampler(shuffle=False), loss averaged over all ranks; the
// epoch's training loss sum travels in the same collective.
std::vector<double> Trainer::evaluate(const torch::Tensor& train_loss_sum) {
  model_->eval();
  auto eval = torch::zeros({3}, train_loss_sum.options());
  {
    torch::NoGradGuard no_grad;
    for (int64_t step = 0; step < eval_steps_; ++step) {
      const auto batch =
          batches_.build(batch_samples(test_positions_, split_.test, step, trainer_.batch_size));
      const auto tokens = static_cast<double>(batch.targets.numel());
      eval[0] += loss_of(batch).to(torch::kDouble) * tokens;
      eval[1] += tokens;
    }
    eval[2] += train_loss_sum;
  }
  model_->train();
  collectives_.allreduce_sum(eval);
  eval = eval.cpu();
  const auto sums = eval.accessor<double, 1>();
  return {sums[0], sums[1], sums[2]};
}

void Trainer::save_snapshot(const TrainingPosition& at, SnapshotKeeper::Kind kind) {
  if (snapshots_) {
    snapshots_->take(at, kind);
  }
  if (kind == SnapshotKeeper::Kind::kLast) {
    // Keep the ranks together so none exits (or races ahead) before the file is whole.
    collectives_.barrier();
  }
}

bool Trainer::stop_due(int64_t epoch, int64_t steps_done) const {
  return epoch == trainer_.stop_after_epoch && steps_done == trainer_.stop_after_step;
}

TrainOutcome Trainer::stop_as_asked(int64_t epoch, int64_t steps_done, int64_t cursor) {
  TrainingPosition at = position_;
  at.finished_epoch = epoch - 1;
  at.steps_into_epoch = steps_done;
  at.samples_into_epoch = cursor;
  say("stopping after epoch " + std::to_string(epoch) + " step " + std::to_string(steps_done) +
      ", as trainer_config.stop_after asks; the next run goes on from the snapshot");
  save_snapshot(at, SnapshotKeeper::Kind::kLast);
  return TrainOutcome::kCompleted;
}

bool Trainer::epoch_snapshot_due(int64_t epoch) const {
  return epoch % trainer_.save_every == 0 || epoch == trainer_.max_epochs;
}

void Trainer::after_step(int64_t epoch, int64_t step) {
  if (!snapshots_) {
    return;
  }
  snapshots_->report_finished();
  // Not after an epoch's last step: the evaluation comes first (and the epoch's own snapshot
  // when save_every says so); a snapshot between them would resume to an epoch without steps.
  if (step + 1 == steps_per_epoch_) {
    return;
  }
  const int64_t global_step = (epoch - 1) * steps_per_epoch_ + step + 1;
  if (!step_snapshot_due(snapshots_->cadence(), global_step, snapshots_->seconds_since_last())) {
    return;
  }
  TrainingPosition at = position_;
  at.finished_epoch = epoch - 1;
  at.steps_into_epoch = step + 1;
  at.samples_into_epoch = committed_.samples_into_epoch;
  snapshots_->take(at, SnapshotKeeper::Kind::kStep);
}

void Trainer::print_sample(int64_t epoch) {
  if (rank_ != 0) {
    return;
  }
  GenerationOptions options;
  options.tokens = trainer_.sample_tokens;
  options.temperature = 0.8;
  options.seed = static_cast<uint64_t>(trainer_.seed);
  const std::vector<int64_t> prompt{corpus_.tokens.front()};
  const auto text = generate(*model_, prompt, options, autocast_dtype_);
  std::ostringstream line;
  line << "sample after epoch " << epoch << " (" << options.tokens << " tokens, temperature "
       << options.temperature << ", seed " << options.seed
       << "; `ddprun-train sample` with this run's configuration writes more):\n"
       << decode_tokens(corpus_, prompt) << decode_tokens(corpus_, text);
  say(line.str());
}

// What a step line and an epoch summary both report, as of now.
ProgressSample Trainer::progress_at(int64_t epoch, int64_t step) const {
  ProgressSample sample;
  sample.epoch = epoch;
  sample.max_epochs = trainer_.max_epochs;
  sample.step = step;
  sample.steps_in_epoch = steps_per_epoch_;
  sample.global_step = steps_done_;
  sample.elapsed_seconds = seconds_since(run_start_);
  sample.eta_seconds = estimate_eta(train_seconds_, steps_done_, steps_total_ - steps_done_);
  return sample;
}

TrainOutcome Trainer::run() {
  if (live_) {
    join_first_world();
  } else {
    load_snapshot();
  }
  announce();
  if (committed_.finished_epoch >= trainer_.max_epochs) {
    say("nothing to do: " + trainer_.snapshot_path + " already finished epoch " +
        std::to_string(committed_.finished_epoch) + " of " + std::to_string(trainer_.max_epochs) +
        " (raise trainer_config.max_epochs to train further, or delete the snapshot)");
    collectives_.shut_down();
    return TrainOutcome::kCompleted;
  }
  steps_total_ = (trainer_.max_epochs - committed_.finished_epoch) * steps_per_epoch_ -
                 committed_.steps_into_epoch;
  model_->train();
  for (;;) {
    try {
      return train_epochs();
    } catch (const CollectiveFailure& failure) {
      if (!live_) {
        throw;
      }
      if (const auto ended = move_to_next_world(failure.what())) {
        return *ended;
      }
    }
  }
}

TrainOutcome Trainer::train_epochs() {
  for (int64_t epoch = committed_.finished_epoch + 1; epoch <= trainer_.max_epochs; ++epoch) {
    if (const auto stopped = run_epoch(epoch)) {
      collectives_.shut_down();
      return *stopped;
    }
  }
  say("done: " + std::to_string(trainer_.max_epochs) + " epochs in " +
      format_duration(seconds_since(run_start_)));
  collectives_.shut_down();
  return TrainOutcome::kCompleted;
}

void Trainer::join_first_world() {
  if (!synchronize_state(/*holds_state=*/false)) {
    load_snapshot();  // a fresh job (or every rank restarted): the snapshot, as without live
  }
  live_->write_joined(inputs_.env.local_rank);
}

bool Trainer::synchronize_state(bool holds_state) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(collectives_.device());
  auto best = torch::full({1}, holds_state ? committed_.steps_committed : int64_t{-1}, longs);
  collectives_.allreduce_max(best);
  const int64_t best_steps = best.cpu().item<int64_t>();
  if (best_steps < 0) {
    return false;
  }
  // The lowest rank among those that hold the most advanced state sends it.
  const bool candidate = holds_state && committed_.steps_committed == best_steps;
  auto lowest = torch::full({1}, candidate ? -rank_ : -world_, longs);
  collectives_.allreduce_max(lowest);
  const int64_t source = -lowest.cpu().item<int64_t>();
  const auto start = Clock::now();
  const LiveState state =
      gather_live_state(*model_, *optimizer_, committed_, scaler_ ? &*scaler_ : nullptr);
  std::vector<torch::Tensor> transfer = state.tensors;
  transfer.insert(transfer.end(), {state.step_counts, state.hyperparameters, state.position});
  if (rank_ == source && std::getenv("DDPRUN_TRAIN_TEST_DIE_SENDING_STATE") != nullptr) {
    ::raise(SIGKILL);  // the test of a peer lost while it sends the state (live_recovery_test)
  }
  try {
    collectives_.broadcast_from(source, transfer);
  } catch (const CollectiveFailure& failure) {
    throw std::runtime_error(
        std::string("live recovery: the state transfer from rank ") + std::to_string(source) +
        " failed (" + failure.what() +
        "); falling back to a restart of every worker from the newest snapshot");
  }
  committed_ = apply_live_state(state, *optimizer_);
  char checksum[16];
  std::snprintf(checksum, sizeof checksum, "%08x", parameter_checksum(*model_));
  tell("live recovery: generation " + std::to_string(generation_) + ": rank " +
       std::to_string(rank_) + " of " + std::to_string(world_) +
       (rank_ == source ? " sent" : " took") + " the state of step " +
       std::to_string(committed_.steps_committed) + " (epoch " +
       std::to_string(committed_.finished_epoch + 1) + ", step " +
       std::to_string(committed_.steps_into_epoch) + ") " +
       (rank_ == source ? "to every rank" : "from rank " + std::to_string(source)) + " in " +
       std::to_string(seconds_since(start)) + " s; parameters crc32 " + checksum);
  return true;
}

std::optional<TrainOutcome> Trainer::move_to_next_world(const std::string& reason) {
  collectives_.abort();  // peers still blocked on this rank fail at once too
  if (!live_->changed()) {
    // The agent has not heard of it yet: it re-forms the round now, not once the heartbeats
    // of a lost node stop.
    live_->report_broken(inputs_.env.local_rank, generation_);
  }
  const auto waiting_since = Clock::now();
  tell("live recovery: rank " + std::to_string(rank_) + " stops after step " +
       std::to_string(committed_.steps_committed) + " (" + reason +
       "); waiting for the next world");
  const auto deadline =
      LiveWatch::Clock::now() + std::chrono::seconds(inputs_.env.live_wait_seconds);
  for (;;) {
    const auto world = live_->wait_for_world(generation_, deadline, inputs_.stop_requested);
    if (!world) {
      if (inputs_.stop_requested && inputs_.stop_requested()) {
        return TrainOutcome::kStopped;
      }
      throw std::runtime_error("live recovery: no new world within " +
                               std::to_string(inputs_.env.live_wait_seconds) +
                               " s; falling back to a restart of every worker");
    }
    generation_ = world->generation;
    live_->running_in(generation_);
    reducer_.reset();  // its pending work holds the old group's connections
    try {
      collectives_.rebuild(environment_in(inputs_.env, *world));
    } catch (const CollectiveFailure& failure) {
      tell("live recovery: the process group of generation " + std::to_string(generation_) +
           " could not be built (" + failure.what() + "); waiting for the next world");
      continue;
    }
    apply_world();
    synchronize_state(/*holds_state=*/true);
    tell("live recovery: rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
         " goes on after " + std::to_string(seconds_since(waiting_since)) + " s");
    return std::nullopt;
  }
}

}  // namespace

TrainOutcome run_training(const TrainerInputs& inputs, std::ostream& out) {
  Trainer trainer(inputs, out);
  return trainer.run();
}

}  // namespace ddprun::train
