#include "rendezvous/store/wire_protocol.hpp"

#include <array>
#include <span>

namespace ddprun::rendezvous::store {
namespace {

// Opcode tables, indexed by opcode byte (tcpstore_protocol.md §3.1).
constexpr std::array kG0Commands{
    Command::set,  Command::compare_set,  Command::get,       Command::add,        Command::check,
    Command::wait, Command::get_num_keys, Command::watch_key, Command::delete_key,
};
constexpr std::array kG1Commands{
    Command::set,    Command::compare_set, Command::get,          Command::add,
    Command::check,  Command::wait,        Command::get_num_keys, Command::delete_key,
    Command::append, Command::multi_get,   Command::multi_set,    Command::cancel_wait,
};
constexpr std::array kG2Commands{
    Command::validate,    Command::set,       Command::compare_set, Command::get,
    Command::add,         Command::check,     Command::wait,        Command::get_num_keys,
    Command::delete_key,  Command::append,    Command::multi_get,   Command::multi_set,
    Command::cancel_wait, Command::ping,      Command::queue_push,  Command::queue_pop,
    Command::queue_len,   Command::list_keys, Command::barrier,
};

std::span<const Command> table_for(WireGeneration generation) {
  switch (generation) {
    case WireGeneration::g0:
      return kG0Commands;
    case WireGeneration::g1:
      return kG1Commands;
    case WireGeneration::g2:
      return kG2Commands;
  }
  return {};
}

}  // namespace

std::optional<Command> command_for_opcode(WireGeneration generation, std::uint8_t opcode) {
  const auto table = table_for(generation);
  if (opcode >= table.size()) {
    return std::nullopt;
  }
  return table[opcode];
}

std::optional<std::uint8_t> opcode_for_command(WireGeneration generation, Command command) {
  const auto table = table_for(generation);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i] == command) {
      return static_cast<std::uint8_t>(i);
    }
  }
  return std::nullopt;
}

std::string_view command_name(Command command) {
  switch (command) {
    case Command::validate:
      return "VALIDATE";
    case Command::set:
      return "SET";
    case Command::compare_set:
      return "COMPARE_SET";
    case Command::get:
      return "GET";
    case Command::add:
      return "ADD";
    case Command::check:
      return "CHECK";
    case Command::wait:
      return "WAIT";
    case Command::get_num_keys:
      return "GETNUMKEYS";
    case Command::watch_key:
      return "WATCH_KEY";
    case Command::delete_key:
      return "DELETE_KEY";
    case Command::append:
      return "APPEND";
    case Command::multi_get:
      return "MULTI_GET";
    case Command::multi_set:
      return "MULTI_SET";
    case Command::cancel_wait:
      return "CANCEL_WAIT";
    case Command::ping:
      return "PING";
    case Command::queue_push:
      return "QUEUE_PUSH";
    case Command::queue_pop:
      return "QUEUE_POP";
    case Command::queue_len:
      return "QUEUE_LEN";
    case Command::list_keys:
      return "LIST_KEYS";
    case Command::barrier:
      return "BARRIER";
  }
  return "UNKNOWN";
}

std::string_view generation_name(WireGeneration generation) {
  switch (generation) {
    case WireGeneration::g0:
      return "G0";
    case WireGeneration::g1:
      return "G1";
    case WireGeneration::g2:
      return "G2";
  }
  return "?";
}

}  // namespace ddprun::rendezvous::store
