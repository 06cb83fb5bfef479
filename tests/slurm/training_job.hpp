#pragma once
// What the Slurm tests (and the etcd end-to-end test) ask of the bundled trainer: a tiny model
// and short epochs, so that a 2-node run takes seconds on the machine's 2 shared CPUs.

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun::slurm_test {

// The configuration overrides: max_epochs of steps_per_epoch steps, a progress line every
// log_every steps, a snapshot after every epoch at `snapshot`.
inline std::vector<std::string> tiny_training_at(const std::filesystem::path& snapshot,
                                                 int max_epochs, int steps_per_epoch,
                                                 int log_every) {
  return {"gpt_config.n_layer=1",
          "gpt_config.n_head=2",
          "gpt_config.n_embd=32",
          "data_config.block_size=32",
          "trainer_config.batch_size=8",
          "trainer_config.eval_batches=1",
          "trainer_config.log_every=" + std::to_string(log_every),
          "trainer_config.save_every=1",
          "trainer_config.max_epochs=" + std::to_string(max_epochs),
          "trainer_config.steps_per_epoch=" + std::to_string(steps_per_epoch),
          "trainer_config.snapshot_path=" + snapshot.string()};
}

// The Slurm tests': every step logged, the snapshot at <dir>/snapshot.pt.
inline std::vector<std::string> tiny_training(const std::filesystem::path& dir, int max_epochs,
                                              int steps_per_epoch) {
  return tiny_training_at(dir / "snapshot.pt", max_epochs, steps_per_epoch, 1);
}

// `sbatch --export` value that gives the job this build's ddprun plus `extra` (e.g. "A=b").
inline std::string export_ddprun(const std::filesystem::path& ddprun, const std::string& extra) {
  return "--export=ALL,DDPRUN=" + ddprun.string() + (extra.empty() ? "" : "," + extra);
}

// Writes a batch script that runs `command` once per node with srun, each task's output in
// <dir>/task-<task id>.out ending with "ddprun on <host> exited <status>". The wrapper shell
// outlives a SIGTERM (its trap runs after the command ends), so the status is always printed.
inline std::filesystem::path write_batch_script(const std::filesystem::path& dir,
                                                const std::vector<std::string>& command) {
  std::string quoted;
  for (const auto& word : command) {
    if (word.find('\'') != std::string::npos) {
      throw std::invalid_argument("write_batch_script: quote in argument " + word);
    }
    quoted += " '" + word + "'";
  }
  const auto script = dir / "job.sbatch";
  std::ofstream out(script);
  out << "#!/bin/bash\n"
      << "srun --kill-on-bad-exit=0 -o '" << (dir / "task-%t.out").string() << "' bash -c "
      << "'trap : TERM; \"$@\"; status=$?; echo \"ddprun on $(hostname) exited $status\"' wrapper"
      << quoted << "\n";
  return script;
}

// The executable a process runs (empty when it is gone), to pick a job's processes on a node.
inline std::filesystem::path exe_of(int pid) {
  std::error_code ignored;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ignored);
}

}  // namespace ddprun::slurm_test
