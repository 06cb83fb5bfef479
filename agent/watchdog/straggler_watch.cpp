#include "agent/watchdog/straggler_watch.hpp"

#include <cstdio>
#include <utility>

#include "agent/watchdog/straggler_report.hpp"
#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

StragglerWatch::StragglerWatch(boost::asio::io_context& io,
                               rendezvous::backends::KvBackend& backend, StragglerConfig config,
                               std::string host, EventLog& events,
                               std::function<void()> before_print)
    : io_(io),
      backend_(backend),
      config_(config),
      host_(std::move(host)),
      events_(events),
      before_print_(std::move(before_print)),
      steps_(config.window),
      timer_(io) {}

StragglerWatch::~StragglerWatch() {
  cancel_all();
}

void StragglerWatch::round_started(const round::RoundInfo& round,
                                   const std::vector<WatchedWorker>& workers) {
  round_ended();
  round_ = round;
  steps_.start_group(workers);
  arm();
}

void StragglerWatch::round_ended() {
  cancel_all();
  ++generation_;
  timer_.cancel();
  round_.reset();
  reported_.clear();
}

void StragglerWatch::on_beats(int local_rank, std::size_t beats) {
  if (round_)
    steps_.on_beats(local_rank, beats, StepTimes::Clock::now());
}

void StragglerWatch::cancel_all() {
  for (const uint64_t id : pending_ops_)
    backend_.cancel(id);
  pending_ops_.clear();
}

void StragglerWatch::start(round::KvOp op, std::function<void(round::KvResult)> done) {
  const uint64_t id = next_op_id_++;
  pending_ops_.insert(id);
  backend_.start(id, std::move(op),
                 [this, id, generation = generation_, done = std::move(done)](round::KvResult r) {
                   pending_ops_.erase(id);
                   if (generation == generation_)
                     done(std::move(r));
                 });
}

void StragglerWatch::arm() {
  timer_.expires_after(config_.window);
  timer_.async_wait([this, generation = generation_](const boost::system::error_code& error) {
    if (!error && generation == generation_ && round_)
      publish();
  });
}

void StragglerWatch::publish() {
  const NodeStepTimes mine{host_, steps_.medians(StepTimes::Clock::now())};
  const round::RoundKeys keys(round_->run_id);
  start(round::KvSet{keys.step_times(round_->round, round_->group_rank),
                     node_step_times_to_json(mine)},
        [this](round::KvResult result) {
          if (round_->group_rank == 0 && std::holds_alternative<round::KvDone>(result))
            compare();
          else
            arm();
        });
}

void StragglerWatch::compare() {
  const round::RoundKeys keys(round_->run_id);
  std::vector<std::string> names;
  for (int g = 0; g < round_->group_world_size; ++g)
    names.push_back(keys.step_times(round_->round, g));
  start(round::KvMultiGet{names}, [this, names](round::KvResult result) {
    arm();
    const auto* values = std::get_if<round::KvValues>(&result);
    if (values == nullptr || values->values.size() != names.size())
      return;
    std::vector<NodeStepTimes> nodes;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!values->values[i])
        continue;  // that node has not published yet
      try {
        nodes.push_back(node_step_times_from_json(*values->values[i]));
      } catch (const std::invalid_argument& error) {
        before_print_();
        std::fprintf(stderr,
                     "ddprun: warning: straggler check: the key '%s' is corrupt (%s); "
                     "left out\n",
                     names[i].c_str(), error.what());
      }
    }
    std::set<int> now;
    for (const Straggler& straggler : find_stragglers(nodes, config_.factor)) {
      now.insert(straggler.rank);
      if (reported_.contains(straggler.rank))
        continue;
      before_print_();
      std::fprintf(stderr, "ddprun: %s\n", describe_straggler(straggler, config_.window).c_str());
      events_.record("straggler", {{"rank", straggler.rank},
                                   {"host", straggler.host},
                                   {"step_s", straggler.step_s},
                                   {"job_median_s", straggler.job_median_s},
                                   {"factor", config_.factor}});
    }
    std::fflush(stderr);
    reported_ = std::move(now);
  });
}

}  // namespace ddprun::agent
