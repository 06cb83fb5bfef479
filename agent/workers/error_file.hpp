#pragma once
// torchrun's error files (TORCHELASTIC_ERROR_FILE): what a worker's @record wrote, and the
// agent's own file for the scheduler above it.

#include <optional>
#include <string>

#include "agent/base/round_types.hpp"

namespace ddprun::agent {

struct ErrorFileContent {
  std::string message;                // py_callstack if present, else the message text
  std::optional<UnixTime> timestamp;  // extraInfo.timestamp
};

// Parses the JSON text of an error file. nullopt when it is not torchrun's format.
std::optional<ErrorFileContent> parse_error_file(const std::string& json_text);

// Reads and parses the file at path (bounded to 1 MiB). nullopt when absent or unreadable.
std::optional<ErrorFileContent> read_error_file(const std::string& path);

// The JSON the agent writes for its own scheduler: a copy of the root-cause worker's file
// with errorCode added (torchrun's dump_error_file), or a synthesized one without it.
std::string agent_error_file_json(const std::string& worker_file_json, const std::string& message,
                                  UnixTime timestamp, int error_code);

// Writes text to path atomically enough for a reader polling it (write then rename).
bool write_text_file(const std::string& path, const std::string& text);

// Reads at most max_bytes of path; nullopt when it cannot be opened.
std::optional<std::string> read_text_file(const std::string& path, std::size_t max_bytes);

}  // namespace ddprun::agent
