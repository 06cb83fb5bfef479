#pragma once
// Key material (the job secret, etcd's password) in the process: overwritten once no longer
// needed, read from files without stray copies, kept out of the environment children inherit
// and out of core dumps. Reading a key file is the only I/O here.

#include <cstddef>
#include <string>
#include <string_view>

namespace ddprun::common {

// Zeros the bytes with explicit_bzero: a plain memset before a free is a dead store the compiler
// may drop.
void wipe(void* data, std::size_t size);

// Zeros all of the string's buffer, its capacity included (bytes a shrink left behind), then
// empties it.
void wipe(std::string& text);

// Wipes a string on every way out of a scope, errors included.
class WipeOnExit {
 public:
  explicit WipeOnExit(std::string& text) : text_(text) {}
  ~WipeOnExit() { wipe(text_); }
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;

 private:
  std::string& text_;
};

// The rest of the open file `fd`, read into one buffer allocated once: a growing string would
// leave copies of the key in freed memory. Throws std::runtime_error saying what went wrong
// ("cannot read: ...", "more than N bytes"), for the caller to prefix with the file's name.
std::string read_key_file(int fd, std::size_t max_bytes);

// Takes the variable out of this process's environment. Its value is zeroed in place first:
// unsetenv only drops the pointer, and /proc/PID/environ shows the bytes the process started
// with. Every process started afterwards inherits an environment without it. Call it before
// other threads exist (the environment is not thread-safe).
void erase_from_process_environment(std::string_view name);

// Makes this process not dumpable (PR_SET_DUMPABLE 0): no core file is written, and processes
// of the same user can neither ptrace it nor read its /proc/PID/mem or environ. Children get
// their own setting back at execve. Returns false (errno set) when the kernel refused.
bool make_not_dumpable();

}  // namespace ddprun::common
