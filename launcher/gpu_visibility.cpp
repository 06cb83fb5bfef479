#include "launcher/gpu_visibility.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

int visible_gpu_count(int physical, const std::optional<std::string>& cuda_visible_devices) {
  if (!cuda_visible_devices)
    return physical;
  std::vector<std::string> seen;
  std::string_view rest = *cuda_visible_devices;
  int count = 0;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    bool valid = false;
    if (item.starts_with("GPU-") || item.starts_with("MIG-")) {
      valid = count < physical;  // a UUID cannot be checked here; never more than exist
    } else {
      int index = -1;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), index);
      valid = error == std::errc() && end == item.data() + item.size() && index >= 0 &&
              index < physical;
    }
    if (!valid || std::find(seen.begin(), seen.end(), item) != seen.end())
      break;
    seen.emplace_back(item);
    ++count;
    if (comma == std::string_view::npos)
      break;
    rest.remove_prefix(comma + 1);
  }
  return count;
}

}  // namespace ddprun::launcher
