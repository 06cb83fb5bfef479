#pragma once
// Pure parsers for the text forms of option values. Each takes the name the user gave the
// option (for the message) and throws UsageError naming the option and the accepted form.
// The forms and limits follow torchrun (run.py, rendezvous/utils.py, multiprocessing/api.py).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/seconds.hpp"
#include "launcher/launch_config.hpp"
#include "rendezvous/round/round_settings.hpp"

namespace ddprun::launcher {

// A list or mapping value (OptionKind::kList) as written in a job template, a YAML file or a
// Python subprocess call, where shell quoting is not removed: "'a=1,b=2'" or "\"0:1,1:2\"".
// When the text, surrounding blanks aside, is wrapped whole in one pair of matching single or
// double quotes, the text inside them; anything else unchanged, so it meets the option's
// usual checks. One pair only: "''x''" is 'x'.
std::string_view without_enclosing_quotes(std::string_view text);

// Whole-string integer in [min, max]; surrounding blanks and a leading '+' are allowed, as
// Python's int() allows them.
int parse_int(std::string_view text, const std::string& option, const std::string& expected,
              int min, int max);

// A number of seconds given for `option` (common::parse_seconds, the one parser; strictly positive
// when `positive`), or a UsageError naming the option.
common::Seconds seconds_option(std::string_view text, const std::string& option, bool positive);

// --straggler-factor: 0 (off), or a decimal number from 1 to 1000 (the seconds grammar).
double parse_straggler_factor(std::string_view text, const std::string& option);

struct NodeRange {
  int min = 1;
  int max = 1;
};
// "N" or "MIN:MAX" with 0 < MIN <= MAX.
NodeRange parse_nnodes(std::string_view text, const std::string& option);

struct Endpoint {
  std::string host;
  std::optional<uint16_t> port;  // empty when the text has none
};
// "host", "host:port", "[v6]" or "[v6]:port"; the host is dot-separated labels, IPv4 or IPv6.
Endpoint parse_endpoint(std::string_view text, const std::string& option);

// "k1=v1,k2=v2": split on ',' then on the first '='; keys and values are trimmed and must not
// be empty. A later key replaces an earlier one.
std::map<std::string, std::string> parse_rdzv_conf(std::string_view text,
                                                   const std::string& option);

// Checks the values of the keys the c10d/static rendezvous read (timeouts are numbers,
// is_host a boolean, store_type tcp|file). Unknown keys are left alone, as torchrun does.
// static_backend: static's own `timeout` becomes the join timeout unless join_timeout is given.
rendezvous::round::RdzvSettings check_rdzv_conf_values(
    const std::map<std::string, std::string>& conf, const std::string& option,
    bool static_backend = false);

// "0".."3" for every local rank, or "LR:S,LR:S" with single-digit local ranks.
StdStreams parse_std_streams(std::string_view text, const std::string& option);

// "" (no filter) or comma-separated local ranks.
std::vector<int> parse_local_ranks(std::string_view text, const std::string& option);

// Comma-separated strings, ",," standing for a literal comma; empty items are dropped.
std::vector<std::string> parse_filter_list(std::string_view text);

// "SIGTERM,SIGUSR1": the numbers of the named signals; unknown names and signals that cannot
// be caught are errors.
std::vector<int> parse_signal_names(std::string_view text, const std::string& option);

// --logs-specs: torchrun loads a Python class from its torchrun.logs_specs entry points by this
// name. torch ships one, "default" (DefaultLogsSpecs), the layout ddprun writes; any other
// name, "" included, is an error before anything starts (torchrun: ValueError, exit 1).
std::string parse_logs_specs(std::string_view text, const std::string& option);

// PET_X for a flag: an integer, non-zero meaning on (torchrun's bool(int(value))).
bool parse_env_flag(std::string_view text, const std::string& option);

}  // namespace ddprun::launcher
