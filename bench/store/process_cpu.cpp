#include "bench/store/process_cpu.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ddprun::bench::store {

std::optional<double> process_cpu_seconds(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(file, stat)) {
    return std::nullopt;
  }
  // The command name (field 2) may hold spaces: count fields from the ")" that ends it.
  // After it come state (field 3) ... utime (field 14) and stime (field 15).
  const auto name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  double ticks = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index >= 14) {
      ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace ddprun::bench::store
