#include "live_watch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "atomic_file.hpp"

namespace ddprun::train {
namespace {

// How often the file is looked at: a world change reaches a blocked step within this.
constexpr std::chrono::milliseconds kPollInterval{5};

std::optional<std::string> read_bounded(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return std::nullopt;
  }
  std::string text(kMaxLiveControlBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(file.gcount()));
  return text;
}

}  // namespace

LiveWatch::LiveWatch(std::string control_path, std::function<void()> on_change)
    : path_(std::move(control_path)), on_change_(std::move(on_change)) {
  const auto text = read_bounded(path_);
  if (!text) {
    throw LiveControlError("live control: cannot read " + path_);
  }
  latest_ = parse_live_control(*text);
  running_generation_ = latest_.generation;
  struct stat info{};
  if (::stat(path_.c_str(), &info) == 0) {
    inode_ = info.st_ino;
    modified_ns_ = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  }
  thread_ = std::jthread([this](const std::stop_token& stop) { watch(stop); });
}

LiveWatch::~LiveWatch() {
  thread_.request_stop();
}

void LiveWatch::watch(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    look();
    std::this_thread::sleep_for(kPollInterval);
  }
}

void LiveWatch::look() {
  struct stat info{};
  if (::stat(path_.c_str(), &info) != 0) {
    return;
  }
  const int64_t modified =
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  if (info.st_ino == inode_ && modified == modified_ns_) {
    return;
  }
  inode_ = info.st_ino;
  modified_ns_ = modified;
  const auto text = read_bounded(path_);
  if (!text) {
    return;
  }
  LiveWorld world;
  try {
    world = parse_live_control(*text);
  } catch (const LiveControlError&) {
    return;  // a torn or foreign file: the agent's next rename replaces it
  }
  bool announce = false;
  {
    const std::lock_guard lock(mutex_);
    latest_ = world;
    announce = (!world.running || world.generation != running_generation_) &&
               !changed_.load(std::memory_order_relaxed);
    if (announce) {
      changed_.store(true, std::memory_order_release);
    }
  }
  updated_.notify_all();
  if (announce && on_change_) {
    on_change_();
  }
}

LiveWorld LiveWatch::latest() const {
  const std::lock_guard lock(mutex_);
  return latest_;
}

void LiveWatch::running_in(uint64_t generation) {
  const std::lock_guard lock(mutex_);
  running_generation_ = generation;
  changed_.store(!latest_.running || latest_.generation != generation, std::memory_order_release);
}

std::optional<LiveWorld> LiveWatch::wait_for_world(uint64_t after, Clock::time_point deadline,
                                                   const std::function<bool()>& stop) {
  std::unique_lock lock(mutex_);
  while (!(latest_.running && latest_.generation > after)) {
    if (Clock::now() >= deadline || (stop && stop())) {
      return std::nullopt;
    }
    updated_.wait_for(lock, std::chrono::milliseconds(50));
  }
  return latest_;
}

void LiveWatch::write_joined(int64_t local_rank) const {
  const std::string pid = std::to_string(::getpid()) + "\n";
  write_file_atomically(path_ + ".joined." + std::to_string(local_rank),
                        [&pid](const ChunkWriter& write) { write(pid.data(), pid.size()); });
}

void LiveWatch::report_broken(int64_t local_rank, uint64_t generation) const {
  const std::string text = std::to_string(generation) + "\n";
  write_file_atomically(path_ + ".broken." + std::to_string(local_rank),
                        [&text](const ChunkWriter& write) { write(text.data(), text.size()); });
}

}  // namespace ddprun::train
