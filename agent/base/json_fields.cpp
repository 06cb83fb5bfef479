#include "agent/base/json_fields.hpp"

#include <stdexcept>

namespace ddprun::agent {

using nlohmann::json;

const json& json_field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end())
    throw std::invalid_argument(std::string("'") + name + "' is missing");
  return *it;
}

std::string json_text(const json& object, const char* name, std::size_t max_bytes) {
  const json& value = json_field(object, name);
  if (!value.is_string())
    throw std::invalid_argument(std::string("'") + name + "' is not a string");
  std::string text = value.get<std::string>();
  if (text.size() > max_bytes)
    throw std::invalid_argument(std::string("'") + name + "' is longer than " +
                                std::to_string(max_bytes) + " bytes");
  return text;
}

int64_t json_integer(const json& value, const std::string& name, int64_t low, int64_t high) {
  if (!value.is_number_integer())
    throw std::invalid_argument("'" + name + "' is not an integer");
  const auto number = value.get<int64_t>();
  if (number < low || number > high)
    throw std::invalid_argument("'" + name + "' is " + std::to_string(number) + ", not in [" +
                                std::to_string(low) + ", " + std::to_string(high) + "]");
  return number;
}

bool json_flag(const json& object, const char* name) {
  const json& value = json_field(object, name);
  if (!value.is_boolean())
    throw std::invalid_argument(std::string("'") + name + "' is not a boolean");
  return value.get<bool>();
}

}  // namespace ddprun::agent
