// RangeCoalescer: the ranges of one event-loop turn as one read-only txn.

#include "rendezvous/backends/etcd/range_coalescer.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace ddprun::rendezvous::backends::etcd {
namespace {

constexpr const char* kRangePath = "/v3/kv/range";
constexpr const char* kTxnPath = "/v3/kv/txn";

// The txn's range replies, one per read, each with the txn's header; an error text when the
// reply does not hold exactly that.
std::variant<std::vector<nlohmann::json>, std::string> split_reply(const nlohmann::json& reply,
                                                                   std::size_t reads) {
  const bool has_responses =
      reply.is_object() && reply.contains("responses") && reply["responses"].is_array();
  const std::size_t got = has_responses ? reply["responses"].size() : 0;
  if (got != reads) {
    return "a read-only txn of " + std::to_string(reads) + " ranges came back with " +
           std::to_string(got) + " responses";
  }
  const auto& responses = reply["responses"];
  std::vector<nlohmann::json> ranges;
  ranges.reserve(reads);
  for (std::size_t i = 0; i < reads; ++i) {
    const auto& response = responses.at(i);
    if (!response.is_object() || !response.contains("response_range") ||
        !response["response_range"].is_object()) {
      return std::string("a read-only txn's response holds no range reply");
    }
    nlohmann::json own = response["response_range"];
    if (reply.contains("header")) {
      own["header"] = reply["header"];  // nested replies carry no revision of their own
    }
    ranges.push_back(std::move(own));
  }
  return ranges;
}

}  // namespace

RangeCoalescer::RangeCoalescer(boost::asio::io_context& io, std::string where, Send send)
    : io_(io), where_(std::move(where)), send_(std::move(send)) {}

void RangeCoalescer::read(std::string range_body, Clock::time_point deadline, Handler done) {
  queued_.push_back(Read{std::move(range_body), deadline, std::move(done)});
  if (!flush_posted_) {
    flush_posted_ = true;
    boost::asio::post(io_, lifetime_.guard([this] { flush(); }));
  }
}

void RangeCoalescer::flush() {
  flush_posted_ = false;
  auto queued = std::move(queued_);
  queued_.clear();
  for (std::size_t first = 0; first < queued.size(); first += kMaxReadsPerTxn) {
    const auto last = std::min(queued.size(), first + kMaxReadsPerTxn);
    std::vector<Read> reads(std::make_move_iterator(queued.begin() + static_cast<long>(first)),
                            std::make_move_iterator(queued.begin() + static_cast<long>(last)));
    if (reads.size() == 1) {
      send_(kRangePath, std::move(reads.front().body), reads.front().deadline,
            std::move(reads.front().done));
    } else {
      send_txn(std::move(reads));
    }
  }
}

void RangeCoalescer::send_txn(std::vector<Read> reads) {
  // The bodies are JSON objects already: the txn is spliced from them, not parsed again.
  std::string body = R"({"success":[)";
  auto deadline = reads.front().deadline;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    body += i == 0 ? R"({"request_range":)" : R"(,{"request_range":)";
    body += reads[i].body;
    body += '}';
    deadline = std::min(deadline, reads[i].deadline);
  }
  body += "]}";
  send_(kTxnPath, std::move(body), deadline,
        [where = where_, reads = std::move(reads)](Outcome outcome) mutable {
          auto waiting = std::move(reads);
          if (auto* failure = std::get_if<EtcdFailure>(&outcome)) {
            for (auto& read : waiting) {
              read.done(*failure);
            }
            return;
          }
          auto split = split_reply(std::get<nlohmann::json>(outcome), waiting.size());
          if (auto* bad = std::get_if<std::string>(&split)) {
            const EtcdFailure failure{round::KvErrorKind::kProtocol, where + ": " + *bad};
            for (auto& read : waiting) {
              read.done(failure);
            }
            return;
          }
          auto& ranges = std::get<std::vector<nlohmann::json>>(split);
          for (std::size_t i = 0; i < waiting.size(); ++i) {
            waiting[i].done(std::move(ranges[i]));
          }
        });
}

}  // namespace ddprun::rendezvous::backends::etcd
