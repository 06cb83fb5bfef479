#include "common/key_material.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ddprun::common {

void wipe(void* data, std::size_t size) {
  ::explicit_bzero(data, size);
}

void wipe(std::string& text) {
  text.resize(text.capacity());  // within the capacity: no reallocation, the same buffer
  wipe(text.data(), text.size());
  text.clear();
}

std::string read_key_file(int fd, std::size_t max_bytes) {
  std::string text(max_bytes + 1, '\0');  // one byte more tells a file that is too long
  const WipeOnExit wipe_buffer(text);
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw std::runtime_error(std::string("cannot read: ") + std::strerror(errno));
    if (got == 0)
      break;
    size += static_cast<std::size_t>(got);
  }
  if (size > max_bytes)
    throw std::runtime_error("more than " + std::to_string(max_bytes) + " bytes");
  return std::string(text.data(), size);  // the one copy left once the buffer is wiped
}

void erase_from_process_environment(std::string_view name) {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=')
      wipe(*entry + name.size() + 1, text.size() - name.size() - 1);
  }
  ::unsetenv(std::string(name).c_str());
}

bool make_not_dumpable() {
  return ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0;
}

}  // namespace ddprun::common
