#pragma once
// The snapshots kept beside the newest (trainer_config.keep_snapshots): the newest is always at
// snapshot_path, where minGPT-ddp looks for it; the one before it is `<snapshot_path>.1`, the one
// before that `<snapshot_path>.2`, and so on. Only files named exactly so are ever deleted.
#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::train {

// `path` for age 0, `<path>.<age>` for older ones.
std::string generation_path(const std::string& path, int64_t age);

// Makes room for a new newest file, to be renamed onto `path` next: each kept generation moves
// one older (`.1` -> `.2`, ...), the current newest is linked as `.1` (so `path` stays whole
// until the rename replaces it), and generations beyond keep - 1 are deleted. keep 1: only the
// deletions. Throws std::runtime_error naming the file on an I/O error.
void age_generations(const std::string& path, int64_t keep);

// Deletes the temporary files a writer killed mid-write left (`<path>.tmp.<pid>`,
// atomic_file.hpp). Call before this run writes its first snapshot.
void remove_stale_temporaries(const std::string& path);

// The files to resume from, newest first: `path` when it exists, then every `<path>.<age>` in the
// folder by age.
std::vector<std::string> existing_generations(const std::string& path);

}  // namespace ddprun::train
