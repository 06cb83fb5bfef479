#include "round_model.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "rendezvous/round/digest_text.hpp"

namespace ddprun::rendezvous::round::model {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

int64_t to_counter(const std::string& text) {
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::string op_text(const KvOp& op) {
  return std::visit(
      Overloaded{
          [](const KvGet& o) { return "get " + o.key; },
          [](const KvMultiGet& o) { return "mget " + std::to_string(o.keys.size()); },
          [](const KvSet& o) { return "set " + o.key + "=" + o.value; },
          [](const KvMultiSet& o) {
            return "mset " + (o.keys.empty() ? std::string() : o.keys.front()) + "+" +
                   std::to_string(o.keys.size());
          },
          [](const KvAdd& o) { return "add " + o.key + " " + std::to_string(o.delta); },
          [](const KvCompareSet& o) {
            return "cas " + o.key + " " + o.expected.value_or("<absent>") + "->" + o.desired;
          },
          [](const KvAppend& o) { return "append " + o.key; },
          [](const KvWait& o) { return "wait " + (o.keys.empty() ? "" : o.keys.front()); },
          [](const KvBeat& o) { return "beat " + o.key; },
          [](const KvProbe& o) { return "probe " + o.key; },
          [](const KvTakeTicket& o) { return "ticket " + o.key + " " + o.member; },
          [](const KvCountTickets& o) { return "tickets " + o.key; },
      },
      op);
}

}  // namespace

World::World(const Scenario& scenario)
    : scenario_(&scenario),
      crashes_left_(scenario.crashes),
      failures_left_(scenario.failures),
      signals_left_(scenario.signals),
      hangs_left_(scenario.hangs) {
  nodes_.resize(static_cast<std::size_t>(scenario.nodes));
  for (int i = 0; i < scenario.nodes; ++i) {
    MachineConfig config;
    config.mode = scenario.mode;
    config.run_id = "job";
    config.self.addr = "node" + std::to_string(i);
    config.self.pid = 100 + i;
    config.self.nonce = "n" + std::to_string(i);
    config.self.nproc_per_node = scenario.nproc;
    config.self.min_nodes = scenario.min_nodes;
    config.self.max_nodes = scenario.max_nodes;
    if (scenario.mode == RoundMode::kStatic) {
      config.self.rank_hint = i;
    }
    config.max_restarts = scenario.max_restarts;
    config.settings.join_timeout = ddprun::common::Seconds(60);
    config.settings.last_call_timeout = ddprun::common::Seconds(5);
    config.settings.close_timeout = ddprun::common::Seconds(10);
    config.settings.keep_alive_interval = ddprun::common::Seconds(4);
    config.settings.keep_alive_max_attempt = 2;
    config.settings.read_timeout = ddprun::common::Seconds(30);
    config.exit_barrier_timeout = ddprun::common::Seconds(30);
    config.where = "rendezvous 'job' at model";
    config.static_master_addr = "node0";
    config.static_master_port = 29500;
    config.wake_wait = ddprun::common::Seconds(1000);
    config.peer_stacks_wait = ddprun::common::Seconds(5);
    config.captures_stacks_for_peers = scenario.hangs > 0;
    nodes_[static_cast<std::size_t>(i)].machine.emplace(std::move(config));
  }
  for (int i = 0; i < scenario.nodes; ++i) {
    if (!scenario.late.contains(i)) {
      nodes_[static_cast<std::size_t>(i)].started = true;
      deliver(i, Begin{});
    }
  }
}

bool World::keys_exist(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return store_.contains(k); });
}

KvResult World::execute(const KvOp& op) {
  auto write = [&](const std::string& key, std::string value) {
    // Error fills (a closed job failing later rounds) may come from every node.
    if (!value.starts_with("error ")) {
      ++writes_[key];
    }
    store_[key] = std::move(value);
  };
  return std::visit(
      Overloaded{
          [&](const KvGet& o) -> KvResult {
            auto it = store_.find(o.key);
            return KvValue{it == store_.end() ? std::nullopt
                                              : std::optional<std::string>(it->second)};
          },
          [&](const KvMultiGet& o) -> KvResult {
            KvValues values;
            for (const auto& key : o.keys) {
              auto it = store_.find(key);
              values.values.push_back(it == store_.end() ? std::nullopt
                                                         : std::optional<std::string>(it->second));
            }
            return values;
          },
          [&](const KvSet& o) -> KvResult {
            write(o.key, o.value);
            return KvDone{};
          },
          [&](const KvMultiSet& o) -> KvResult {
            for (std::size_t i = 0; i < o.keys.size(); ++i) {
              write(o.keys[i], o.values[i]);
            }
            return KvDone{};
          },
          [&](const KvAdd& o) -> KvResult {
            auto it = store_.find(o.key);
            const int64_t value = (it == store_.end() ? 0 : to_counter(it->second)) + o.delta;
            if (o.delta != 0 || it == store_.end()) {
              write(o.key, std::to_string(value));
            }
            return KvCounter{value};
          },
          [&](const KvCompareSet& o) -> KvResult {
            auto it = store_.find(o.key);
            const bool matches =
                o.expected ? (it != store_.end() && it->second == *o.expected) : it == store_.end();
            if (matches) {
              write(o.key, o.desired);
              return KvValue{o.desired};
            }
            return KvValue{it == store_.end() ? o.expected : std::optional(it->second)};
          },
          [&](const KvAppend& o) -> KvResult {
            write(o.key, store_[o.key] + o.value);
            return KvDone{};
          },
          [&](const KvWait&) -> KvResult { return KvDone{}; },  // waits are not queued
          [&](const KvBeat& o) -> KvResult {
            write(o.key, std::to_string(to_counter(store_[o.key]) + 1));
            return KvDone{};
          },
          [&](const KvProbe& o) -> KvResult {
            auto it = store_.find(o.key);
            return KvLiveness{it == store_.end() ? 0 : to_counter(it->second), false};
          },
          [&](const KvTakeTicket& o) -> KvResult {
            const int64_t value = to_counter(store_[o.key]) + 1;
            write(o.key, std::to_string(value));
            return KvCounter{value};
          },
          [&](const KvCountTickets& o) -> KvResult {
            auto it = store_.find(o.key);
            return KvCounter{it == store_.end() ? 0 : to_counter(it->second)};
          },
      },
      op);
}

void World::deliver(int index, const MachineEvent& event) {
  SimNode& node = nodes_[static_cast<std::size_t>(index)];
  node.machine->step(event, now_);
  absorb(index);
}

void World::absorb(int index) {
  SimNode& node = nodes_[static_cast<std::size_t>(index)];
  for (auto& effect : node.machine->take_effects()) {
    std::visit(
        Overloaded{
            [&](IssueKv& issue) {
              if (auto* wait = std::get_if<KvWait>(&issue.op)) {
                node.waits.push_back(
                    WaitOp{issue.id, wait->keys, now_ + ddprun::common::Seconds(wait->timeout)});
              } else {
                node.queue.push_back(std::move(issue));
              }
            },
            [&](CancelKv& cancel) {
              std::erase_if(node.waits, [&](const WaitOp& w) { return w.id == cancel.id; });
            },
            [&](HostWorkersStore& host) {
              node.hosting_requested = true;
              node.machine->step(WorkersStoreHosted{"node" + std::to_string(index),
                                                    static_cast<uint16_t>(30000 + host.round)},
                                 now_);
              absorb(index);
            },
            [&](StartWorkers& start) {
              const RoundInfo& r = start.round;
              log_.push_back("node" + std::to_string(index) + " starts round " +
                             std::to_string(r.round) + " rank " + std::to_string(r.group_rank) +
                             "/" + std::to_string(r.group_world_size));
              if (node.workers != SimNode::Workers::kNone) {
                problem_ = "node" + std::to_string(index) + " starts workers while others run";
              }
              if (!node.rounds_started.insert(r.round).second) {
                problem_ = "node" + std::to_string(index) + " starts round " +
                           std::to_string(r.round) + " twice";
              }
              RoundRecord& rec = rounds_[r.round];
              if (rec.restart_count < 0) {
                rec.group_world_size = r.group_world_size;
                rec.world_size = r.world_size;
                rec.restart_count = r.restart_count;
              } else if (rec.group_world_size != r.group_world_size ||
                         rec.world_size != r.world_size || rec.restart_count != r.restart_count) {
                problem_ = "round " + std::to_string(r.round) + " has two different assignments";
              }
              if (rec.node_of_group_rank.contains(r.group_rank)) {
                problem_ = "round " + std::to_string(r.round) + ": group rank " +
                           std::to_string(r.group_rank) + " given twice";
              }
              rec.node_of_group_rank[r.group_rank] = index;
              rec.base_of_group_rank[r.group_rank] = r.base_global_rank;
              node.workers = SimNode::Workers::kRunning;
              node.running = r;
              node.running_since = now_;
            },
            [&](StopWorkers& stop) {
              // Live recovery keeps workers only through a membership change, never through a
              // stop for failed workers.
              if (stop.membership_change && stop.peers_failed) {
                problem_ = "node" + std::to_string(index) +
                           " stops for a membership change and for failed peers at once";
              }
              node.release_owed = false;  // stopping the group ends the hang too
              if (node.workers == SimNode::Workers::kRunning) {
                node.workers = SimNode::Workers::kStopping;
              } else {
                problem_ = "node" + std::to_string(index) + " stops workers that do not run";
              }
            },
            [&](Notice& n) { log_.push_back("node" + std::to_string(index) + ": " + n.text); },
            [&](Finish& f) {
              log_.push_back("node" + std::to_string(index) + " finishes " +
                             std::to_string(f.exit_status) + " (" + f.reason + ")");
              if (node.workers != SimNode::Workers::kNone) {
                problem_ = "node" + std::to_string(index) + " finishes with workers running";
              }
              node.finish = f;
              node.queue.clear();
              node.waits.clear();
            },
            [&](CaptureStacks&) {
              log_.push_back("node" + std::to_string(index) + " captures stacks for a peer");
              if (node.capture_owed) {
                problem_ = "node" + std::to_string(index) + " asked twice for its stacks";
              }
              node.capture_owed = true;
            },
            [&](PeersCapturedStacks&) {
              log_.push_back("node" + std::to_string(index) + " may kill its hung worker");
              if (!node.release_owed) {
                problem_ = "node" + std::to_string(index) + " released a hang it did not report";
              }
              node.release_owed = false;
              node.released = true;
            },
            [&](CheckNode&) {
              problem_ = "node" + std::to_string(index) + " asked for node checks it has not";
            },
        },
        effect);
  }
}

std::vector<std::function<void(World&)>> World::actions() const {
  std::vector<std::function<void(World&)>> out;
  bool protocol = false;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    const SimNode& node = nodes_[static_cast<std::size_t>(i)];
    if (node.crashed || !node.started || node.finish) {
      continue;
    }
    if (!node.queue.empty()) {
      protocol = true;
      out.push_back([i](World& w) {
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        IssueKv issue = std::move(n.queue.front());
        n.queue.erase(n.queue.begin());
        KvResult result = w.execute(issue.op);
        w.deliver(i, KvAnswered{issue.id, std::move(result)});
      });
    }
    for (const WaitOp& wait : node.waits) {
      const bool ready = keys_exist(wait.keys);
      if (ready || wait.deadline <= now_) {
        protocol = true;
        const uint64_t id = wait.id;
        out.push_back([i, id, ready](World& w) {
          SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
          const auto asked = std::find_if(n.waits.begin(), n.waits.end(),
                                          [&](const WaitOp& x) { return x.id == id; });
          KvReady answer(ready);
          // Odd nodes get the values with the wait (as from etcd), even ones read them after
          // it (as from the store): the model checks both.
          if (ready && i % 2 == 1) {
            for (const auto& key : asked->keys) {
              answer.values.push_back(w.store_.at(key));
            }
          }
          n.waits.erase(asked);
          w.deliver(i, KvAnswered{id, std::move(answer)});
        });
      }
    }
    if (auto deadline = node.machine->next_deadline(); deadline && *deadline <= now_) {
      protocol = true;
      out.push_back([i](World& w) { w.deliver(i, TimerFired{}); });
    }
    if (node.workers == SimNode::Workers::kStopping) {
      protocol = true;
      out.push_back([i](World& w) {
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        n.workers = SimNode::Workers::kNone;
        n.hung = false;
        n.released = false;
        w.deliver(i, WorkersStopped{});
      });
    }
    if (node.capture_owed || node.own_capture_owed) {
      protocol = true;
      out.push_back([i](World& w) {
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        n.capture_owed = false;
        n.own_capture_owed = false;  // one capture serves both
        w.deliver(i, StacksCaptured{});
      });
    }
    if (node.hung && node.released && node.workers == SimNode::Workers::kRunning) {
      protocol = true;  // the watchdog kills the hung worker: the group fails
      out.push_back([i](World& w) {
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        n.hung = false;  // killed; the others stop on the machine's StopWorkers
        n.released = false;
        WorkerFailure f;
        f.timestamp = UnixTime{w.now_.time_since_epoch()};
        f.host = "node" + std::to_string(i);
        f.global_rank = n.running->base_global_rank;
        f.exit_code = -9;
        f.message = "hung";
        w.log_.push_back("node" + std::to_string(i) + " kills its hung worker");
        w.deliver(i, WorkersFailed{{f}});
      });
    }
  }
  // Environment: at any time, also while the protocol has work.
  const auto& s = *scenario_;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (s.env_at_quiescence && protocol) {
      break;
    }
    const SimNode& node = nodes_[static_cast<std::size_t>(i)];
    const bool faulty = s.faulty.empty() || s.faulty.contains(i);
    if (!node.started && !node.crashed) {
      out.push_back([i](World& w) {
        w.nodes_[static_cast<std::size_t>(i)].started = true;
        w.log_.push_back("node" + std::to_string(i) + " starts late");
        w.deliver(i, Begin{});
      });
      continue;
    }
    if (node.crashed || node.finish) {
      continue;
    }
    if (node.workers == SimNode::Workers::kRunning && !node.hung) {
      if (hangs_left_ > 0 && faulty) {
        out.push_back([i](World& w) {
          --w.hangs_left_;
          SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
          n.hung = true;
          n.release_owed = true;
          n.own_capture_owed = true;
          w.log_.push_back("node" + std::to_string(i) + " worker hangs");
          w.deliver(i, HangDetected{"node" + std::to_string(i) + ": rank 0 hung"});
        });
      }
      out.push_back([i](World& w) {
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        n.workers = SimNode::Workers::kNone;
        w.log_.push_back("node" + std::to_string(i) + " workers succeed");
        w.deliver(i, WorkersSucceeded{});
      });
      if (failures_left_ > 0 && faulty) {
        out.push_back([i](World& w) {
          --w.failures_left_;
          SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
          WorkerFailure f;
          f.timestamp = UnixTime{w.now_.time_since_epoch()};
          f.host = "node" + std::to_string(i);
          f.global_rank = n.running->base_global_rank;
          f.local_rank = 0;
          f.exit_code = 1;
          f.message = "model failure";
          w.log_.push_back("node" + std::to_string(i) + " workers fail");
          w.deliver(i, WorkersFailed{{f}});
        });
      }
    }
    // Live recovery: a crashed peer breaks the collectives of a running group, which reports
    // it (round::CollectiveBroke), once per group, at any moment the model chooses.
    if (s.broken_collectives && node.workers == SimNode::Workers::kRunning &&
        !node.broke_reported &&
        std::any_of(nodes_.begin(), nodes_.end(), [](const SimNode& n) { return n.crashed; })) {
      out.push_back([i](World& w) {
        w.nodes_[static_cast<std::size_t>(i)].broke_reported = true;
        w.log_.push_back("node" + std::to_string(i) + " workers report a broken collective");
        w.deliver(i, CollectiveBroke{});
      });
    }
    if (crashes_left_ > 0 && faulty) {
      out.push_back([i](World& w) {
        --w.crashes_left_;
        SimNode& n = w.nodes_[static_cast<std::size_t>(i)];
        n.crashed = true;
        n.queue.clear();
        n.waits.clear();
        n.workers = SimNode::Workers::kNone;
        w.log_.push_back("node" + std::to_string(i) + " crashes");
      });
    }
    if (signals_left_ > 0 && faulty) {
      out.push_back([i](World& w) {
        --w.signals_left_;
        w.log_.push_back("node" + std::to_string(i) + " gets SIGTERM");
        w.deliver(i, SignalReceived{15});
      });
    }
  }
  MachineTime time_cap = kModelStart + s.horizon;
  for (const SimNode& node : nodes_) {
    if (node.crashed || node.finish) {
      continue;
    }
    if (node.workers == SimNode::Workers::kRunning && !node.hung) {
      time_cap = std::min(time_cap, node.running_since + s.work);
    }
    if (!node.started) {
      time_cap = std::min(time_cap, kModelStart + s.late_by);
    }
  }
  if (!protocol) {
    if (auto t = next_time(); t && *t <= time_cap) {
      const MachineTime when = *t;
      out.push_back([when](World& w) { w.now_ = when; });
    }
  }
  return out;
}

std::optional<MachineTime> World::next_time() const {
  std::optional<MachineTime> t;
  for (const SimNode& node : nodes_) {
    if (node.crashed || !node.started || node.finish) {
      continue;
    }
    auto consider = [&](MachineTime d) {
      if (d > now_ && (!t || d < *t)) {
        t = d;
      }
    };
    for (const auto& w : node.waits) {
      consider(w.deadline);
    }
    if (auto d = node.machine->next_deadline()) {
      consider(*d);
    }
  }
  return t;
}

std::string World::violated() const {
  if (!problem_.empty()) {
    return problem_;
  }
  for (const auto& [round, rec] : rounds_) {
    for (const auto& [rank, base] : rec.base_of_group_rank) {
      if (rank < 0 || rank >= rec.group_world_size) {
        return "round " + std::to_string(round) + ": group rank " + std::to_string(rank) +
               " outside its world";
      }
      if (base != rank * scenario_->nproc) {
        return "round " + std::to_string(round) + ": ranks are not dense";
      }
    }
    if (rec.world_size != rec.group_world_size * scenario_->nproc) {
      return "round " + std::to_string(round) + ": world size disagrees with its nodes";
    }
    if (rec.restart_count > scenario_->max_restarts) {
      return "round " + std::to_string(round) + " runs restart " +
             std::to_string(rec.restart_count) + " beyond --max-restarts";
    }
  }
  // Single writers: a round's close, assignment and failure decision are claimed first.
  const std::string prefix = "ddprun/rdzv/job/r";
  for (const auto& [key, count] : writes_) {
    const bool in_round = key.starts_with(prefix) && key.size() > prefix.size() &&
                          std::isdigit(static_cast<unsigned char>(key[prefix.size()]));
    const bool single =
        in_round && (key.ends_with("/closed") || key.find("/assign/") != std::string::npos ||
                     key.ends_with("/failed") || key.ends_with("/close_claim") ||
                     key.ends_with("/fail_claim") || key.ends_with("/master"));
    if (single && count > 1) {
      return "key " + key + " written " + std::to_string(count) + " times";
    }
  }
  // Restarts are counted once per decided round.
  int decided = 0;
  int claimed = 0;
  for (const auto& [key, value] : store_) {
    decided += key.ends_with("/failed") ? 1 : 0;
    claimed += key.ends_with("/fail_claim") ? 1 : 0;
  }
  auto it = store_.find("ddprun/rdzv/job/restarts");
  const int64_t restarts = it == store_.end() ? 0 : to_counter(it->second);
  if (scenario_->mode == RoundMode::kDynamic && (restarts < decided || restarts > claimed)) {
    return "restart counter " + std::to_string(restarts) + " but " + std::to_string(decided) +
           " rounds decided a failure";
  }
  return "";
}

std::string World::terminal_problem() const {
  bool faults = false;
  for (const SimNode& node : nodes_) {
    faults = faults || node.crashed;
  }
  faults = faults || failures_left_ < scenario_->failures || signals_left_ < scenario_->signals ||
           hangs_left_ < scenario_->hangs;
  // Without a crash or a signal, every node answers a hang: none is released by the bound.
  const bool answers_expected =
      std::none_of(nodes_.begin(), nodes_.end(), [](const SimNode& n) { return n.crashed; }) &&
      signals_left_ == scenario_->signals;
  for (const std::string& line : log_) {
    if (answers_expected && line.find("not every other node captured") != std::string::npos) {
      return "a hang waited out the bound although every node could answer: " + line;
    }
  }
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    const SimNode& node = nodes_[static_cast<std::size_t>(i)];
    if (node.crashed) {
      continue;
    }
    if (!node.finish) {
      return "node" + std::to_string(i) + " never finished (phase " + node.machine->phase_name() +
             ")";
    }
    const int status = node.finish->exit_status;
    if (status != 0 && status != 1 && status != 128 + 15) {
      return "node" + std::to_string(i) + " exits " + std::to_string(status);
    }
    if (!faults && status != 0) {
      return "node" + std::to_string(i) + " failed without any fault: " + node.finish->reason;
    }
  }
  return "";
}

uint64_t World::digest() const {
  DigestText out;
  out << now_ << '#' << crashes_left_ << failures_left_ << signals_left_ << hangs_left_ << '#';
  for (const auto& [k, v] : store_) {
    out << k << '=' << v << ';';
  }
  for (const auto& [k, c] : writes_) {
    out << (c > 1 ? "W" : "w");
  }
  for (const SimNode& node : nodes_) {
    out << "\n"
        << node.started << node.crashed << node.broke_reported << static_cast<int>(node.workers)
        << (node.finish ? node.finish->exit_status : -1) << node.hung << node.release_owed
        << node.released << node.capture_owed << node.own_capture_owed << '|'
        << node.machine->digest() << '|';
    for (const auto& q : node.queue) {
      out << op_text(q.op) << ',';
    }
    for (const auto& w : node.waits) {
      out << (w.keys.empty() ? "" : w.keys.front()) << '@' << w.deadline << ',';
    }
  }
  for (const auto& [round, rec] : rounds_) {
    out << round << ':' << rec.node_of_group_rank.size() << ',';
  }
  return std::hash<std::string>{}(out.str());
}

std::string World::trace() const {
  std::string out;
  for (const auto& line : log_) {
    out += "  " + line + "\n";
  }
  return out;
}

ExploreResult explore(const Scenario& scenario) {
  ExploreResult result;
  std::unordered_set<uint64_t> seen;
  std::vector<World> stack;
  stack.emplace_back(scenario);
  seen.insert(stack.back().digest());
  while (!stack.empty()) {
    World world = std::move(stack.back());
    stack.pop_back();
    ++result.states;
    if (auto bad = world.violated(); !bad.empty()) {
      result.failure = scenario.name + ": " + bad + "\n" + world.trace();
      return result;
    }
    auto actions = world.actions();
    if (actions.empty()) {
      ++result.terminals;
      if (auto bad = world.terminal_problem(); !bad.empty()) {
        result.failure = scenario.name + ": " + bad + "\n" + world.trace();
        return result;
      }
      continue;
    }
    if (result.states > scenario.max_states) {
      result.failure = scenario.name + ": more than " + std::to_string(scenario.max_states) +
                       " states; shrink the scenario";
      return result;
    }
    for (auto& action : actions) {
      World next = world;
      action(next);
      if (seen.insert(next.digest()).second) {
        stack.push_back(std::move(next));
      }
    }
  }
  return result;
}

}  // namespace ddprun::rendezvous::round::model
