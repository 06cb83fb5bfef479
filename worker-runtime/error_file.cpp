#include "error_file.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ddprun::train {

void write_error_file(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') {
    return;
  }
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const nlohmann::json content = {
      {"message", {{"message", message}, {"extraInfo", {{"timestamp", std::to_string(now)}}}}}};
  std::ofstream file(path, std::ios::trunc);
  file << content.dump() << '\n';
}

}  // namespace ddprun::train
