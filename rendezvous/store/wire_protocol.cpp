#include "rendezvous/store/wire_protocol.hpp"

#include <array>
#include <span>
#include <string_view>

#include "rendezvous/store/job_auth.hpp"

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

// Names as PyTorch's TCPStore spells them, in the order of Command (sized by the list, so the
// static_assert catches a command added to one and not the other).
constexpr auto kCommandNames = std::to_array<std::string_view>({
    "VALIDATE",  "SET",         "COMPARE_SET", "GET",        "ADD",       "CHECK",
    "WAIT",      "GETNUMKEYS",  "WATCH_KEY",   "DELETE_KEY", "APPEND",    "MULTI_GET",
    "MULTI_SET", "CANCEL_WAIT", "PING",        "QUEUE_PUSH", "QUEUE_POP", "QUEUE_LEN",
    "LIST_KEYS", "BARRIER",     "AUTH_HELLO",  "AUTH_PROOF",
});
static_assert(kCommandNames.size() == static_cast<std::size_t>(Command::auth_proof) + 1);

constexpr auto kGenerationNames = std::to_array<std::string_view>({"G0", "G1", "G2"});
static_assert(kGenerationNames.size() == static_cast<std::size_t>(WireGeneration::g2) + 1);

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
  if (opcode == kAuthHelloOpcode) {
    return Command::auth_hello;
  }
  if (opcode == kAuthProofOpcode) {
    return Command::auth_proof;
  }
  const auto table = table_for(generation);
  if (opcode >= table.size()) {
    return std::nullopt;
  }
  return table[opcode];
}

std::optional<std::uint8_t> opcode_for_command(WireGeneration generation, Command command) {
  if (command == Command::auth_hello) {
    return kAuthHelloOpcode;
  }
  if (command == Command::auth_proof) {
    return kAuthProofOpcode;
  }
  const auto table = table_for(generation);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i] == command) {
      return static_cast<std::uint8_t>(i);
    }
  }
  return std::nullopt;
}

std::string_view command_name(Command command) {
  const auto index = static_cast<std::size_t>(command);
  return index < kCommandNames.size() ? kCommandNames[index] : "UNKNOWN";
}

std::string_view generation_name(WireGeneration generation) {
  const auto index = static_cast<std::size_t>(generation);
  return index < kGenerationNames.size() ? kGenerationNames[index] : "?";
}

}  // namespace ddprun::rendezvous::store
