#include "launcher/gpu_visibility.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

std::vector<std::string_view> cuda_visible_entries(std::string_view value) {
  std::vector<std::string_view> entries;
  while (!value.empty()) {
    const auto comma = value.find(',');
    std::string_view entry = value.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ')
      entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ')
      entry.remove_suffix(1);
    entries.push_back(entry);
    if (comma == std::string_view::npos)
      break;
    value.remove_prefix(comma + 1);
  }
  return entries;
}

int visible_gpu_count(int physical, const std::optional<std::string>& cuda_visible_devices) {
  if (!cuda_visible_devices)
    return physical;
  std::vector<std::string_view> seen;
  for (const std::string_view item : cuda_visible_entries(*cuda_visible_devices)) {
    bool valid = false;
    if (item.starts_with("GPU-") || item.starts_with("MIG-")) {
      valid = std::ssize(seen) < physical;  // a UUID cannot be checked here; never more than exist
    } else {
      int index = -1;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), index);
      valid = error == std::errc() && end == item.data() + item.size() && index >= 0 &&
              index < physical;
    }
    if (!valid || std::find(seen.begin(), seen.end(), item) != seen.end())
      break;
    seen.push_back(item);
  }
  return static_cast<int>(seen.size());
}

}  // namespace ddprun::launcher
