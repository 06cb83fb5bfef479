#pragma once
// `ddprun ... train ARGS`: the bundled trainer's configuration is checked once, before the
// rendezvous, by running `ddprun-train --check-config ARGS` (the trainer's own parser, so the
// launcher neither links it nor repeats its rules). A bad value is then said once, and nothing
// starts; without this every rank of every restart said it again.

#include <string>
#include <vector>

namespace ddprun::launcher {

// Runs the check for the trainer's command line `trainer_argv` (its path first). Returns when
// the configuration is good; the trainer printed its own message on stderr otherwise, and a
// UsageError (exit 2) says that nothing was started. A check that could not run at all (the
// trainer fails to start) throws std::runtime_error naming its status.
void check_trainer_config(const std::vector<std::string>& trainer_argv);

}  // namespace ddprun::launcher
