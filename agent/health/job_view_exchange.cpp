#include "agent/health/job_view_exchange.hpp"

#include <cctype>
#include <utility>

#include "rendezvous/round/round_keys.hpp"

namespace ddprun::agent {

namespace round = rendezvous::round;

namespace {

// "host:port" as node 0 wrote it, if it is one: a host of address characters, a port number.
bool is_page_location(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || text.size() > 300)
    return false;
  for (std::size_t i = 0; i < colon; ++i) {
    const char c = text[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%')
      return false;
  }
  const std::string port = text.substr(colon + 1);
  return !port.empty() && port.size() <= 5 &&
         port.find_first_not_of("0123456789") == std::string::npos && std::stoi(port) >= 1 &&
         std::stoi(port) <= 65535;
}

}  // namespace

JobViewExchange::JobViewExchange(rendezvous::backends::KvBackend& backend, HealthBoard& board,
                                 std::function<std::string()> record, uint16_t page_port)
    : kv_(backend, rendezvous::backends::kJobViewOpIds),
      board_(board),
      record_(std::move(record)),
      page_port_(page_port) {}

void JobViewExchange::round_started(const round::RoundInfo& round) {
  kv_.reset();
  if (!round_ || round_->round != round.round)
    next_request_ = 1;  // a restart within one round keeps counting its requests
  round_ = round;
  last_request_.reset();
  reading_ = false;
  last_published_.reset();
  publish_until_ = {};
  board_.publish_peers({});
  page_location_.clear();
  const round::RoundKeys keys(round.run_id);
  if (round.group_rank == 0) {
    kv_.start(round::KvSet{keys.job_view_page(round.round),
                           round.master_addr + ":" + std::to_string(page_port_)},
              [](round::KvResult) {});
    return;
  }
  learn_page_location();
  wait_for_request();
}

void JobViewExchange::learn_page_location() {
  const round::RoundKeys keys(round_->run_id);
  const std::string key = keys.job_view_page(round_->round);
  kv_.start(
      round::KvWait{{key}, std::chrono::duration_cast<std::chrono::milliseconds>(kRequestWait)},
      [this, key](round::KvResult waited) {
        const auto* ready = std::get_if<round::KvReady>(&waited);
        if (ready == nullptr || !ready->ready)
          return;  // node 0 serves no page (no health port there), or the store failed
        kv_.start(round::KvGet{key}, [this](round::KvResult got) {
          const auto* value = std::get_if<round::KvValue>(&got);
          if (value != nullptr && value->value && is_page_location(*value->value))
            page_location_ = *value->value;
        });
      });
}

void JobViewExchange::round_ended() {
  kv_.reset();
  reading_ = false;
  if (round_)
    round_->group_rank = -1;  // keeps the round number (and so the request count) only
  board_.publish_peers({});
}

void JobViewExchange::tick(Clock::time_point now) {
  if (!round_ || round_->group_rank < 0)
    return;
  if (round_->group_rank == 0) {
    const bool looked_at = board_.viewed_within(kViewLease, now);
    if (round_->group_world_size > 1 && looked_at) {
      ask_and_read(now);
    } else if (holding_peers_) {
      board_.publish_peers({});  // nobody looks: the records' memory goes back
      holding_peers_ = false;
    }
    return;
  }
  if (now < publish_until_ && (!last_published_ || now - *last_published_ >= kPublishEvery)) {
    last_published_ = now;
    publish();
  }
}

void JobViewExchange::ask_and_read(Clock::time_point now) {
  const round::RoundKeys keys(round_->run_id);
  if (!last_request_ || now - *last_request_ >= kRequestEvery) {
    last_request_ = now;
    kv_.start(round::KvSet{keys.job_view_request(round_->round, next_request_++), "1"},
              [](round::KvResult) {});
  }
  if (reading_)
    return;
  reading_ = true;
  std::vector<std::string> node_keys;
  for (int group_rank = 1; group_rank < round_->group_world_size; ++group_rank)
    node_keys.push_back(keys.job_view_node(round_->round, group_rank));
  kv_.start(round::KvMultiGet{node_keys}, [this](round::KvResult result) {
    reading_ = false;
    const auto* values = std::get_if<round::KvValues>(&result);
    if (values == nullptr)
      return;  // the store failed: the round machine reports it
    std::vector<PeerRecord> peers;
    for (std::size_t i = 0; i < values->values.size(); ++i)
      peers.push_back({static_cast<int>(i) + 1, values->values[i].value_or("")});
    board_.publish_peers(std::move(peers));
    holding_peers_ = true;
  });
}

void JobViewExchange::wait_for_request() {
  const round::RoundKeys keys(round_->run_id);
  kv_.start(round::KvWait{{keys.job_view_request(round_->round, next_request_)},
                          std::chrono::duration_cast<std::chrono::milliseconds>(kRequestWait)},
            [this](round::KvResult result) {
              const auto* ready = std::get_if<round::KvReady>(&result);
              if (ready == nullptr)
                return;  // the store failed: the round machine reports it
              if (ready->ready) {
                ++next_request_;
                const auto now = Clock::now();
                publish_until_ = now + kPublishFor;
                last_published_ = now;
                publish();
              }
              wait_for_request();
            });
}

void JobViewExchange::publish() {
  const round::RoundKeys keys(round_->run_id);
  kv_.start(round::KvSet{keys.job_view_node(round_->round, round_->group_rank), record_()},
            [](round::KvResult) {});
}

}  // namespace ddprun::agent
