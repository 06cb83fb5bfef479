#include "snapshot_generations.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace ddprun::train {
namespace {

namespace fs = std::filesystem;

// Ages above this are not ours (a generation number is small; this bounds the folder scan).
constexpr int64_t kMaxAge = 1'000'000;

std::runtime_error io_error(const std::string& what, const std::string& path, int error) {
  return std::runtime_error("snapshot: cannot " + what + " " + path + ": " + std::strerror(error));
}

// The age of `name` when it is `<base>.<digits>` (no sign, no leading zero), else 0.
int64_t age_of(const std::string& name, const std::string& base) {
  if (name.size() <= base.size() + 1 || !name.starts_with(base) || name[base.size()] != '.') {
    return 0;
  }
  const std::string_view digits = std::string_view(name).substr(base.size() + 1);
  if (digits.front() == '0') {
    return 0;
  }
  int64_t age = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), age);
  if (error != std::errc() || end != digits.data() + digits.size() || age > kMaxAge) {
    return 0;
  }
  return age;
}

// The names of the files beside `path` (in its folder; an unreadable folder has none).
std::vector<std::string> names_beside(const std::string& path) {
  const fs::path file(path);
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator
           it(file.has_parent_path() ? file.parent_path() : fs::path("."), error),
       end;
       !error && it != end; it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  return names;
}

// Our generations of `path` in its folder, by age (oldest last).
std::vector<int64_t> existing_ages(const std::string& path) {
  const auto base = fs::path(path).filename().string();
  std::vector<int64_t> ages;
  for (const auto& name : names_beside(path)) {
    if (const auto age = age_of(name, base); age > 0) {
      ages.push_back(age);
    }
  }
  std::sort(ages.begin(), ages.end());
  return ages;
}

void remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw io_error("delete", path, errno);
  }
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) {
    throw io_error("rename " + from + " to", to, errno);
  }
}

}  // namespace

std::string generation_path(const std::string& path, int64_t age) {
  return age == 0 ? path : path + "." + std::to_string(age);
}

void age_generations(const std::string& path, int64_t keep) {
  const auto ages = existing_ages(path);
  for (const auto age : ages) {
    if (age >= keep - 1) {
      remove_file(generation_path(path, age));
    }
  }
  // Oldest first, so no move lands on a file still to be moved.
  for (int64_t age = keep - 2; age >= 1; --age) {
    rename_file(generation_path(path, age), generation_path(path, age + 1));
  }
  if (keep < 2 || ::access(path.c_str(), F_OK) != 0) {
    return;
  }
  const auto older = generation_path(path, 1);
  if (::link(path.c_str(), older.c_str()) == 0) {
    return;
  }
  // A file system without hard links: the newest moves instead, and is missing until the new
  // one is renamed in (a crash then leaves it as `.1`, which the resume falls back to).
  if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != EXDEV) {
    throw io_error("link " + path + " as", older, errno);
  }
  rename_file(path, older);
}

void remove_stale_temporaries(const std::string& path) {
  const fs::path file(path);
  const auto prefix = file.filename().string() + ".tmp.";
  for (const auto& name : names_beside(path)) {
    if (name.size() > prefix.size() && name.starts_with(prefix) &&
        name.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
      remove_file((file.parent_path() / name).string());
    }
  }
}

std::vector<std::string> existing_generations(const std::string& path) {
  std::vector<std::string> files;
  std::error_code error;
  if (fs::exists(path, error)) {
    files.push_back(path);
  }
  for (const auto age : existing_ages(path)) {
    files.push_back(generation_path(path, age));
  }
  return files;
}

}  // namespace ddprun::train
