#include "agent/stacks/stacks_command.hpp"

#include <unistd.h>

#include <charconv>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/base/node_name.hpp"
#include "agent/node/rendezvous_setup.hpp"
#include "agent/stacks/stacks_answer.hpp"
#include "rendezvous/round/round_info.hpp"
#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {
namespace {

namespace round = rendezvous::round;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kConnectLimit{10};

// A counter from the store: decimal digits only, as the machine writes them.
std::optional<uint64_t> parse_counter(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || text.size() > 19 || text.front() == '-' || text.front() == '+')
    return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end)
    return std::nullopt;
  return value;
}

std::string error_text(const round::KvResult& result) {
  if (const auto* error = std::get_if<round::KvError>(&result))
    return error->message;
  return "an unexpected answer from the store";
}

// One request, step by step on one io_context: the running round, a request number, the
// request, node 0's answer (it says how many nodes to wait for), then everyone's.
class StacksRequest {
 public:
  StacksRequest(boost::asio::io_context& io, RendezvousClient client, std::string run_id,
                std::ostream& out, std::ostream& err)
      : io_(io),
        client_(std::move(client)),
        keys_(run_id),
        out_(out),
        err_(err),
        deadline_(Clock::now() + kConnectLimit + kStacksAnswerLimit) {}

  int run() {
    get(keys_.round(), [this](std::optional<std::string> value) {
      if (!value)
        return fail("no round of " + client_.where + " has formed: is the job running, with " +
                    "this --rdzv_id?");
      const auto r = parse_counter(*value);
      if (!r)
        return fail("the key '" + keys_.round() + "' of " + client_.where +
                    " does not hold a round number: it is corrupt");
      round_ = *r;
      ask();
    });
    io_.run_until(deadline_);
    if (!status_) {
      err_ << "ddprun stacks: no answer from " << client_.where << " within "
           << (kConnectLimit + kStacksAnswerLimit).count() << " s\n";
      return 1;
    }
    return *status_;
  }

 private:
  void ask() {
    op(round::KvAdd{keys_.stacks_requests(round_), 1}, [this](round::KvResult result) {
      const auto* counter = std::get_if<round::KvCounter>(&result);
      if (counter == nullptr || counter->value < 1)
        return fail("cannot number the request: " + error_text(result));
      request_ = static_cast<uint64_t>(counter->value);
      const nlohmann::json from = {{"host", node_name(std::nullopt)}, {"pid", ::getpid()}};
      op(round::KvSet{keys_.stacks_request(round_, request_), from.dump()},
         [this](round::KvResult set) {
           if (!std::holds_alternative<round::KvDone>(set))
             return fail("cannot place the request: " + error_text(set));
           wait_for_first();
         });
    });
  }

  void wait_for_first() {
    wait({keys_.stacks_taken(round_, request_, 0)}, [this](bool ready) {
      if (!ready)
        return fail("node 0 of round " + std::to_string(round_) + " did not answer within " +
                    std::to_string(kStacksAnswerLimit.count()) +
                    " s (the round may have ended, or its agent is not running)");
      get(keys_.stacks_taken(round_, request_, 0), [this](std::optional<std::string> value) {
        try {
          nodes_ = stacks_answer_from_json(value.value_or("")).nodes;
        } catch (const std::invalid_argument& error) {
          return fail("the key '" + keys_.stacks_taken(round_, request_, 0) +
                      "' is corrupt: " + error.what());
        }
        wait(answer_keys(), [this](bool) { collect(); });
      });
    });
  }

  void collect() {
    op(round::KvMultiGet{answer_keys()}, [this](round::KvResult result) {
      const auto* values = std::get_if<round::KvValues>(&result);
      if (values == nullptr)
        return fail("cannot read the answers: " + error_text(result));
      out_ << "stacks of round " << round_ << " (" << client_.where << ", request " << request_
           << "):\n";
      int missing = 0;
      for (int g = 0; g < nodes_; ++g) {
        const auto& value = values->values[static_cast<std::size_t>(g)];
        if (!value) {
          ++missing;
          out_ << "  node " << g << ": no answer within " << kStacksAnswerLimit.count() << " s\n";
          continue;
        }
        try {
          out_ << "  " << describe_stacks_answer(stacks_answer_from_json(*value)) << '\n';
        } catch (const std::invalid_argument& error) {
          ++missing;
          out_ << "  node " << g << ": the key '" << keys_.stacks_taken(round_, request_, g)
               << "' is corrupt: " << error.what() << '\n';
        }
      }
      out_.flush();
      if (missing > 0)
        err_ << "ddprun stacks: " << missing << " of " << nodes_ << " nodes did not answer\n";
      finish(missing == 0 ? 0 : 1);
    });
  }

  std::vector<std::string> answer_keys() const {
    std::vector<std::string> keys;
    for (int g = 0; g < nodes_; ++g)
      keys.push_back(keys_.stacks_taken(round_, request_, g));
    return keys;
  }

  void op(round::KvOp kv, std::function<void(round::KvResult)> done) {
    client_.backend->start(next_id_++, std::move(kv), std::move(done));
  }
  void get(const std::string& key, std::function<void(std::optional<std::string>)> done) {
    op(round::KvGet{key}, [this, done = std::move(done)](round::KvResult result) {
      if (auto* value = std::get_if<round::KvValue>(&result))
        return done(std::move(value->value));
      fail("cannot read " + client_.where + ": " + error_text(result));
    });
  }
  void wait(std::vector<std::string> keys, std::function<void(bool)> done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min<Clock::duration>(deadline_ - Clock::now(), kStacksAnswerLimit));
    op(round::KvWait{std::move(keys), std::max(left, std::chrono::milliseconds(1))},
       [this, done = std::move(done)](round::KvResult result) {
         if (const auto* ready = std::get_if<round::KvReady>(&result))
           return done(ready->ready);
         fail("cannot wait for the answers: " + error_text(result));
       });
  }
  void fail(const std::string& message) {
    err_ << "ddprun stacks: " << message << '\n';
    finish(1);
  }
  void finish(int status) {
    status_ = status;
    io_.stop();
  }

  boost::asio::io_context& io_;
  RendezvousClient client_;
  round::RoundKeys keys_;
  std::ostream& out_;
  std::ostream& err_;
  Clock::time_point deadline_;
  uint64_t next_id_ = 1;
  uint64_t round_ = 0;
  uint64_t request_ = 0;
  int nodes_ = 1;
  std::optional<int> status_;
};

}  // namespace

int request_stacks(const RendezvousConfig& config, std::ostream& out, std::ostream& err) {
  boost::asio::io_context io;
  RendezvousClient client;
  try {
    client = connect_to_rendezvous(config, io, kConnectLimit);
  } catch (const round::RendezvousError& error) {
    err << "ddprun stacks: " << error.what() << '\n';
    return 1;
  }
  return StacksRequest(io, std::move(client), config.run_id, out, err).run();
}

}  // namespace ddprun::agent
