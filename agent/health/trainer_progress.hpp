#pragma once
// The bundled trainer's progress for the job page: its loss and tokens/s curves and its last
// snapshot, from the metrics lines its rank 0 copies for the agent (DDPRUN_AGENT_METRICS). Read
// only when the page asks, and only the file's last kTrainerTailBytes. Pure: the text goes in.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::agent {

inline constexpr std::size_t kTrainerTailBytes = 512 * 1024;
inline constexpr std::size_t kTrainerCurvePoints = 200;

// {"steps": [global_iter, ...], "train_loss": [...], "tokens_per_second": [...],
//  "eval": [[global_iter, eval_loss], ...], "snapshot": {"path", "finished_epoch",
//  "steps_into_epoch", "unix_time", "stall_seconds"} or null}; the curves thinned to at most
// kTrainerCurvePoints. Lines that are not such records (a cut first line, junk) are skipped.
nlohmann::json trainer_progress(std::string_view tail);

// The last kTrainerTailBytes of the file at path, "" when it cannot be read.
std::string read_tail(const std::string& path);

}  // namespace ddprun::agent
