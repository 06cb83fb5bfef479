#include "snapshot_writer.hpp"

#include <exception>

#include "elapsed.hpp"
#include "snapshot_generations.hpp"
#include "snapshot_io.hpp"

namespace ddprun::train {

SnapshotWriter::SnapshotWriter() : thread_([this](const std::stop_token& stop) { run(stop); }) {}

SnapshotWriter::~SnapshotWriter() {
  wait_idle();
  thread_.request_stop();
}

bool SnapshotWriter::busy() const {
  const std::lock_guard lock(mutex_);
  return job_.has_value();
}

void SnapshotWriter::submit(SnapshotJob job) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !job_; });
  job_ = std::move(job);
  changed_.notify_all();
}

void SnapshotWriter::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !job_; });
}

std::optional<SnapshotWritten> SnapshotWriter::take_finished() {
  const std::lock_guard lock(mutex_);
  return std::exchange(finished_, std::nullopt);
}

void SnapshotWriter::run(const std::stop_token& stop) {
  while (true) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait(lock, stop, [&] { return job_.has_value(); })) {
      return;  // stop requested while idle
    }
    // The job stays in job_ (busy) while it is written; only this thread touches it meanwhile.
    SnapshotJob& job = *job_;
    lock.unlock();
    SnapshotWritten written;
    written.position = job.position;
    const auto start = Clock::now();
    try {
      if (job.parts.wait_for_copies) {
        job.parts.wait_for_copies();
      }
      write_snapshot_file(job.path, job.parts.content, job.parts.resume_record,
                          [&] { age_generations(job.path, job.keep); });
    } catch (const std::exception& e) {
      written.error = e.what();
    }
    written.write_seconds = seconds_since(start);
    lock.lock();
    job_.reset();
    finished_ = std::move(written);
    changed_.notify_all();
  }
}

}  // namespace ddprun::train
