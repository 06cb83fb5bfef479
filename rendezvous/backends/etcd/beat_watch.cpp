// BeatWatch: a peer's beat key, present or not, as its watch last said.

#include "rendezvous/backends/etcd/beat_watch.hpp"

namespace ddprun::rendezvous::backends::etcd {

BeatWatch::BeatWatch(EtcdClient& client, std::string key, std::int64_t read_revision)
    : key_(std::move(key)) {
  watch_ = std::make_unique<WatchStream>(
      client, key_, std::string(), read_revision + 1,
      WatchStream::Handlers{.on_events =
                                [this](const std::vector<WatchEvent>& events) {
                                  for (const auto& event : events) {
                                    if (event.kv.key == key_) {
                                      present_ = !event.deleted;
                                    }
                                  }
                                },
                            .on_compacted = [this] { broken_ = true; },
                            .on_failure = [this](const EtcdFailure&) { broken_ = true; }});
}

void BeatWatch::start() {
  watch_->start();
}

}  // namespace ddprun::rendezvous::backends::etcd
