#pragma once
// One request of torchrun's file-timer protocol (torch.distributed.elastic.timer
// FileTimerClient): a single JSON line
//   {"version": 1, "pid": 123, "scope_id": "train.py#12", "expiration_time": 1.7e9, "signal": 9}
// parsed and validated once, where it enters. Pure; never throws on bad input: a line that is
// too long or malformed comes back as a rejection naming the problem.

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::agent {

// FileTimerClient refuses requests longer than select.PIPE_BUF, so a request is always one
// atomic write; anything longer did not come from it.
inline constexpr std::size_t kFileTimerMaxLineBytes = 4096;
// The only protocol version PyTorch has written (1.13 to 2.13). torchrun does not read the
// field; a different value means a protocol we do not know, so it is refused.
inline constexpr long long kFileTimerProtocolVersion = 1;
// Linux signal numbers stop at SIGRTMAX (64); kill() refuses anything above.
inline constexpr int kMaxSignalNumber = 64;

struct FileTimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  // Absolute wall-clock time (time.time(), unix epoch seconds). Negative: a release.
  double expiration_epoch_s = 0;
  // The signal to send on expiry; <= 0 means "report, do not kill" (torchrun's rule).
  int signal = 0;

  bool is_release() const { return expiration_epoch_s < 0; }
};

struct FileTimerParseResult {
  std::optional<FileTimerRequest> request;  // set when the line is a valid request
  std::string rejection;                    // otherwise: why it was refused

  bool ok() const { return request.has_value(); }
};

// line: one request without its trailing '\n' (surrounding whitespace is allowed). Accepts what
// Python's json.dumps writes and compact JSON, integer or fractional expiration_time (and
// Python's bare Infinity: a timer that never fires), fields in any order and extra fields (as
// torchrun does).
FileTimerParseResult parse_file_timer_request(std::string_view line);

}  // namespace ddprun::agent
