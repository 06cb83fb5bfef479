#pragma once
// torchrun's error file for a worker that fails (TORCHELASTIC_ERROR_FILE, as PyTorch's @record
// writes it): the agent puts its message in the failure table and the events file, so a job's
// summary says why ddprun-train stopped (a live recovery that fell back names its reason there).
#include <string>

namespace ddprun::train {

// {"message": {"message": MESSAGE, "extraInfo": {"timestamp": "<unix seconds>"}}} into the file
// TORCHELASTIC_ERROR_FILE names; nothing when it is unset. Errors writing it are ignored: the
// message is on stderr as well.
void write_error_file(const std::string& message);

}  // namespace ddprun::train
