#include "agent/watchdog/progress/straggler_watch.hpp"

#include <cstdio>
#include <utility>

#include "agent/watchdog/progress/straggler_report.hpp"
#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

StragglerWatch::StragglerWatch(boost::asio::io_context& io,
                               rendezvous::backends::KvBackend& backend, StragglerConfig config,
                               std::string host, EventLog& events,
                               std::function<void()> before_print)
    : kv_(backend, rendezvous::backends::kStragglerWatchOpIds),
      config_(config),
      host_(std::move(host)),
      events_(events),
      before_print_(std::move(before_print)),
      steps_(config.window),
      timer_(io) {}

void StragglerWatch::round_started(const round::RoundInfo& round,
                                   const std::vector<WatchedWorker>& workers) {
  round_ended();
  round_ = round;
  steps_.start_group(workers);
  arm();
}

void StragglerWatch::round_ended() {
  kv_.reset();
  ++generation_;
  timer_.cancel();
  round_.reset();
  reported_.clear();
}

void StragglerWatch::on_beats(int local_rank, std::size_t beats) {
  if (round_)
    steps_.on_beats(local_rank, beats, StepTimes::Clock::now());
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
  kv_.start(round::KvSet{keys.step_times(round_->round, round_->group_rank),
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
  kv_.start(round::KvMultiGet{names}, [this, names](round::KvResult result) {
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
