#include "launcher/value_parsers.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

#include "common/host_port.hpp"
#include "common/signals.hpp"
#include "common/text.hpp"
#include "launcher/text.hpp"
#include "launcher/usage_error.hpp"
#include "rendezvous/round/round_settings.hpp"

namespace ddprun::launcher {
namespace {

using common::trim;

std::string quoted(std::string_view text) {
  return cat("'", text, "'");
}

std::optional<long long> to_integer(std::string_view text) {
  text = trim(text);
  if (text.starts_with('+'))
    text.remove_prefix(1);
  if (text.empty())
    return std::nullopt;
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos)
      return parts;
    start = at + 1;
  }
}

constexpr std::string_view kStdExpected =
    "0, 1, 2 or 3 (none, stdout, stderr, both) for every local rank, or LOCAL_RANK:0-3 pairs "
    "such as 0:1,1:2 (local ranks 0-9)";

int to_std_bits(char digit, std::string_view text, const std::string& option) {
  if (digit < '0' || digit > '3') {
    throw UsageError(option, cat(quoted(text), " has stream value ", std::string(1, digit)),
                     std::string(kStdExpected));
  }
  return digit - '0';
}

}  // namespace

std::string_view without_enclosing_quotes(std::string_view text) {
  const std::string_view value = trim(text);
  const bool quoted_whole = value.size() >= 2 && (value.front() == '\'' || value.front() == '"') &&
                            value.back() == value.front();
  return quoted_whole ? value.substr(1, value.size() - 2) : text;
}

int parse_int(std::string_view text, const std::string& option, const std::string& expected,
              int min, int max) {
  const auto value = to_integer(text);
  if (!value)
    throw UsageError(option, quoted(text) + " is not an integer", expected);
  if (*value < min || *value > max) {
    throw UsageError(option, quoted(text) + " is out of range", expected);
  }
  return static_cast<int>(*value);
}

double parse_straggler_factor(std::string_view text, const std::string& option) {
  const auto parsed = common::parse_seconds(text, /*zero_allowed=*/true);
  const auto* number = std::get_if<common::Seconds>(&parsed);
  if (number == nullptr ||
      (number->count() != 0 && (number->count() < 1 || number->count() > 1000)))
    throw UsageError(option, "'" + std::string(text) + "' is not a factor",
                     "0 (off) or a number from 1 to 1000, e.g. 2");
  return number->count();
}

common::Seconds seconds_option(std::string_view text, const std::string& option, bool positive) {
  const auto parsed = common::parse_seconds(text, /*zero_allowed=*/!positive);
  if (const auto* seconds = std::get_if<common::Seconds>(&parsed))
    return *seconds;
  const bool not_a_number =
      std::get<common::SecondsProblem>(parsed) == common::SecondsProblem::kNotANumber;
  throw UsageError(option, quoted(text) + (not_a_number ? " is not a number" : " is out of range"),
                   common::seconds_expected(!positive));
}

NodeRange parse_nnodes(std::string_view text, const std::string& option) {
  const std::string expected = "N or MIN:MAX with 0 < MIN <= MAX";
  const auto fields = split(text, ':');
  if (fields.size() > 2) {
    throw UsageError(option, quoted(text) + " has more than two fields", expected);
  }
  const auto number = [&](std::string_view field) {
    const auto value = to_integer(field);
    if (!value || *value > std::numeric_limits<int>::max()) {
      throw UsageError(option, quoted(text) + " is not a node count", expected);
    }
    return *value;
  };
  const long long min = number(fields.front());
  const long long max = number(fields.back());
  if (min <= 0)
    throw UsageError(option, quoted(text) + " has MIN below 1", expected);
  if (min > max)
    throw UsageError(option, quoted(text) + " has MIN greater than MAX", expected);
  return {static_cast<int>(min), static_cast<int>(max)};
}

Endpoint parse_endpoint(std::string_view text, const std::string& option) {
  try {
    auto parsed = common::parse_host_port(trim(text));
    return Endpoint{std::move(parsed.host), parsed.port};
  } catch (const std::invalid_argument& error) {
    throw UsageError(option, quoted(text) + " has " + error.what(),
                     "HOST or HOST:PORT with PORT 0-65535, an IPv6 host in brackets "
                     "([::1]:29400)");
  }
}

std::map<std::string, std::string> parse_rdzv_conf(std::string_view text,
                                                   const std::string& option) {
  const std::string expected = "KEY=VALUE[,KEY=VALUE...] with non-empty keys and values";
  std::map<std::string, std::string> conf;
  if (trim(text).empty())
    return conf;
  for (std::string_view item : split(trim(text), ',')) {
    const auto eq = item.find('=');
    const std::string key(trim(item.substr(0, eq)));
    if (key.empty())
      throw UsageError(option, quoted(item) + " has an empty key", expected);
    const std::string value(eq == std::string_view::npos ? "" : trim(item.substr(eq + 1)));
    if (value.empty()) {
      throw UsageError(option, "key '" + key + "' has no value", expected);
    }
    conf.insert_or_assign(key, value);
  }
  return conf;
}

rendezvous::round::RdzvSettings check_rdzv_conf_values(
    const std::map<std::string, std::string>& conf, const std::string& option,
    bool static_backend) {
  // The round protocol's own keys are parsed where the protocol defines them, once.
  rendezvous::round::RdzvSettings settings;
  try {
    settings = rendezvous::round::parse_rdzv_settings(conf);
  } catch (const rendezvous::round::RdzvConfError& error) {
    throw UsageError(option + " " + error.key, error.problem, error.expected);
  }
  for (const auto& [key, value] : conf) {
    const std::string where = option + " " + key;
    if (key == "timeout") {
      const common::Seconds timeout = seconds_option(value, where, /*positive=*/true);
      // static's own key (torchrun injects 900); c10d's join_timeout wins when both are given.
      if (static_backend && !conf.contains("join_timeout"))
        settings.join_timeout = timeout;
    } else if (key == "rank") {
      parse_int(value, where, "an integer, 0 or more", 0, std::numeric_limits<int>::max());
    } else if (key == "store_type") {
      if (value != "tcp" && value != "file") {
        throw UsageError(where, quoted(value) + " is not a store type", "tcp or file");
      }
    }
  }
  return settings;
}

StdStreams parse_std_streams(std::string_view text, const std::string& option) {
  const std::string_view value = trim(text);
  StdStreams streams;
  if (value.size() == 1) {
    streams.all = to_std_bits(value[0], text, option);
    return streams;
  }
  for (std::string_view pair : split(value, ',')) {
    if (pair.size() != 3 || pair[1] != ':' || pair[0] < '0' || pair[0] > '9') {
      throw UsageError(option, quoted(text) + " is not a stream value or LOCAL_RANK:VALUE list",
                       std::string(kStdExpected));
    }
    streams.per_local_rank.insert_or_assign(pair[0] - '0', to_std_bits(pair[2], text, option));
  }
  return streams;
}

std::vector<int> parse_local_ranks(std::string_view text, const std::string& option) {
  std::vector<int> ranks;
  if (trim(text).empty())
    return ranks;
  for (std::string_view item : split(text, ',')) {
    const int rank = parse_int(item, option, "comma-separated local ranks such as 0,1,2", 0,
                               std::numeric_limits<int>::max());
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end())
      ranks.push_back(rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<std::string> parse_filter_list(std::string_view text) {
  std::vector<std::string> filters;
  std::string current;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';
      ++i;
    } else {
      if (!current.empty())
        filters.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty())
    filters.push_back(std::move(current));
  return filters;
}

std::vector<int> parse_signal_names(std::string_view text, const std::string& option) {
  const std::string expected = "comma-separated signal names such as SIGTERM,SIGINT,SIGUSR1";
  std::vector<int> numbers;
  for (std::string_view item : split(text, ',')) {
    const std::string_view name = trim(item);
    if (name == "SIGKILL" || name == "SIGSTOP") {
      throw UsageError(option, std::string(name) + " cannot be caught", expected);
    }
    const std::optional<int> number = common::signal_number(name);
    if (!number) {
      throw UsageError(option, quoted(name) + " is not a signal name", expected);
    }
    if (std::find(numbers.begin(), numbers.end(), *number) == numbers.end()) {
      numbers.push_back(*number);
    }
  }
  return numbers;
}

std::string parse_logs_specs(std::string_view text, const std::string& option) {
  if (text == "default")
    return std::string(text);
  throw UsageError(
      option,
      cat(quoted(text),
          " would name a torchrun.logs_specs plugin, a Python class that ddprun cannot load"),
      "default (torchrun's own log layout, which ddprun writes) or no --logs-specs; ddprun "
      "shapes its logs with --log-dir, -r/--redirects, -t/--tee, --local-ranks-filter, "
      "--duplicate-stdout-filters and --duplicate-stderr-filters");
}

bool parse_env_flag(std::string_view text, const std::string& option) {
  const auto value = to_integer(text);
  if (!value)
    throw UsageError(option, quoted(text) + " is not an integer", "0 or 1");
  return *value != 0;
}

}  // namespace ddprun::launcher
