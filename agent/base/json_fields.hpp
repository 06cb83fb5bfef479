#pragma once
// Reading a JSON record that came from the store (which anyone on the network can write to),
// every field checked where it enters: a field that is missing, of another type or out of its
// bounds is a std::invalid_argument naming it ("'host' is missing", "'nodes' is 0, not in
// [1, 16]"). Pure.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ddprun::agent {

const nlohmann::json& json_field(const nlohmann::json& object, const char* name);
// A string of at most max_bytes.
std::string json_text(const nlohmann::json& object, const char* name, std::size_t max_bytes);
// An integer in [low, high]; `name` says which value it is.
int64_t json_integer(const nlohmann::json& value, const std::string& name, int64_t low,
                     int64_t high);
bool json_flag(const nlohmann::json& object, const char* name);

}  // namespace ddprun::agent
