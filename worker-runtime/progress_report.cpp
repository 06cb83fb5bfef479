#include "progress_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ddprun::train {

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  const long long h = total / 3600;
  const long long m = (total / 60) % 60;
  const long long s = total % 60;
  char text[48];
  if (h > 0) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", m, s);
  }
  return text;
}

std::string progress_line(const ProgressSample& s) {
  char text[256];
  std::snprintf(text, sizeof text,
                "epoch %lld/%lld | iter %lld/%lld | train loss %.4f | %.0f tok/s | elapsed %s | "
                "eta %s",
                static_cast<long long>(s.epoch), static_cast<long long>(s.max_epochs),
                static_cast<long long>(s.step), static_cast<long long>(s.steps_in_epoch),
                s.train_loss, s.tokens_per_second, format_duration(s.elapsed_seconds).c_str(),
                format_duration(s.eta_seconds).c_str());
  return text;
}

std::string epoch_summary_line(const ProgressSample& s) {
  char eval[32] = "n/a";
  if (s.eval_loss) {
    std::snprintf(eval, sizeof eval, "%.4f", *s.eval_loss);
  }
  char memory[48] = "";
  if (!s.peak_memory_kind.empty()) {
    std::snprintf(memory, sizeof memory, " | peak %s %.0f MiB", s.peak_memory_kind.c_str(),
                  static_cast<double>(s.peak_memory_bytes) / (1024.0 * 1024.0));
  }
  char text[320];
  std::snprintf(text, sizeof text,
                "epoch %lld/%lld done | iter %lld | train loss %.4f | eval loss %s | %.0f tok/s | "
                "elapsed %s | eta %s%s",
                static_cast<long long>(s.epoch), static_cast<long long>(s.max_epochs),
                static_cast<long long>(s.global_step), s.train_loss, eval, s.tokens_per_second,
                format_duration(s.elapsed_seconds).c_str(), format_duration(s.eta_seconds).c_str(),
                memory);
  return text;
}

std::string metrics_json_line(const ProgressSample& s, const std::string& kind) {
  nlohmann::json j = {{"kind", kind},
                      {"epoch", s.epoch},
                      {"max_epochs", s.max_epochs},
                      {"iter", s.step},
                      {"iters_in_epoch", s.steps_in_epoch},
                      {"global_iter", s.global_step},
                      {"train_loss", s.train_loss},
                      {"tokens_per_second", s.tokens_per_second},
                      {"elapsed_seconds", s.elapsed_seconds},
                      {"eta_seconds", s.eta_seconds}};
  j["eval_loss"] = s.eval_loss ? nlohmann::json(*s.eval_loss) : nlohmann::json(nullptr);
  if (!s.peak_memory_kind.empty()) {
    j["peak_memory_bytes"] = s.peak_memory_bytes;
    j["peak_memory_kind"] = s.peak_memory_kind;
  }
  return j.dump();
}

std::string snapshot_json_line(int64_t finished_epoch, int64_t steps_into_epoch, double seconds) {
  return nlohmann::json{{"kind", "snapshot"},
                        {"finished_epoch", finished_epoch},
                        {"steps_into_epoch", steps_into_epoch},
                        {"save_seconds", seconds}}
      .dump();
}

std::string resume_json_line(int64_t finished_epoch, int64_t steps_into_epoch, double seconds) {
  return nlohmann::json{{"kind", "resume"},
                        {"finished_epoch", finished_epoch},
                        {"steps_into_epoch", steps_into_epoch},
                        {"load_seconds", seconds}}
      .dump();
}

double estimate_eta(double elapsed_seconds, int64_t steps_done, int64_t steps_left) {
  if (steps_done <= 0) {
    return 0.0;
  }
  return elapsed_seconds / static_cast<double>(steps_done) * static_cast<double>(steps_left);
}

}  // namespace ddprun::train
