#include "agent/stacks/stacks_answer.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/base/json_fields.hpp"

namespace ddprun::agent {
namespace {

using nlohmann::json;

std::string text_field(const json& object, const char* name) {
  return json_text(object, name, kMaxStacksAnswerText);
}

int int_field(const json& value, const std::string& name, int low, int high) {
  return static_cast<int>(json_integer(value, name, low, high));
}

json stacks_object(const std::map<int, std::string>& stacks) {
  json object = json::object();
  for (const auto& [rank, text] : stacks)
    object[std::to_string(rank)] = text;
  return object;
}

// "0-3", "0,2,5": consecutive runs joined.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    text += (text.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i)
      text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace

std::string stacks_answer_to_json(const StacksAnswer& answer) {
  return json{{"host", answer.host},   {"group_rank", answer.group_rank},
              {"nodes", answer.nodes}, {"stacks_dir", answer.stacks_dir},
              {"ranks", answer.ranks}, {"stacks", stacks_object(answer.stacks)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

StacksAnswer stacks_answer_from_json(const std::string& text) {
  if (text.size() > kMaxStacksAnswerBytes)
    throw std::invalid_argument("the record is longer than " +
                                std::to_string(kMaxStacksAnswerBytes) + " bytes");
  const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object())
    throw std::invalid_argument("the record is not a JSON object");
  StacksAnswer answer;
  answer.host = text_field(object, "host");
  answer.stacks_dir = text_field(object, "stacks_dir");
  answer.nodes = int_field(json_field(object, "nodes"), "nodes", 1, kMaxStacksAnswerNodes);
  answer.group_rank =
      int_field(json_field(object, "group_rank"), "group_rank", 0, answer.nodes - 1);
  const json& ranks = json_field(object, "ranks");
  if (!ranks.is_array() || ranks.size() > kMaxStacksAnswerRanks)
    throw std::invalid_argument("'ranks' is not an array of at most " +
                                std::to_string(kMaxStacksAnswerRanks) + " ranks");
  for (const json& rank : ranks)
    answer.ranks.push_back(int_field(rank, "ranks", 0, kMaxStacksAnswerNodes * 1024 - 1));
  // Optional: agents before the job page wrote none.
  if (const auto it = object.find("stacks"); it != object.end()) {
    if (!it->is_object() || it->size() > kMaxStacksAnswerRanks)
      throw std::invalid_argument("'stacks' is not an object of at most " +
                                  std::to_string(kMaxStacksAnswerRanks) + " ranks");
    for (const auto& [rank, stack] : it->items()) {
      const int number = int_field(json::parse(rank, nullptr, false), "a rank of 'stacks'", 0,
                                   kMaxStacksAnswerNodes * 1024 - 1);
      if (!stack.is_string() || stack.get_ref<const std::string&>().size() > kMaxStackText)
        throw std::invalid_argument("the stack of rank " + std::to_string(number) +
                                    " is not a string of at most " + std::to_string(kMaxStackText) +
                                    " bytes");
      answer.stacks[number] = stack.get<std::string>();
    }
  }
  return answer;
}

std::string describe_stacks_answer(const StacksAnswer& answer) {
  std::string line = "node " + std::to_string(answer.group_rank) + " (" + answer.host + "): ";
  if (answer.stacks_dir.empty())
    return line + "no stacks captured (no running workers there)";
  return line + "ranks " + rank_ranges(answer.ranks) + ": " + answer.stacks_dir;
}

}  // namespace ddprun::agent
