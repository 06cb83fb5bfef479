#include "agent/log_prefix.hpp"

#include <cctype>

namespace ddprun::agent {

namespace {

bool lookup(std::string_view name, const PrefixFields& fields, std::string& out) {
  if (name == "role_name") {
    out = fields.role_name;
  } else if (name == "rank") {
    out = std::to_string(fields.rank);
  } else if (name == "local_rank") {
    out = std::to_string(fields.local_rank);
  } else if (name == "hostname") {
    out = fields.hostname;
  } else {
    return false;
  }
  return true;
}

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::string expand_prefix_template(std::string_view templ, const PrefixFields& fields) {
  std::string out;
  std::size_t i = 0;
  while (i < templ.size()) {
    if (templ[i] != '$' || i + 1 >= templ.size()) {
      out += templ[i++];
      continue;
    }
    if (templ[i + 1] == '$') {  // "$$" is a literal dollar, as in string.Template
      out += '$';
      i += 2;
      continue;
    }
    std::string_view name;
    std::size_t end = 0;
    if (templ[i + 1] == '{') {
      auto close = templ.find('}', i + 2);
      if (close == std::string_view::npos) {
        out += templ.substr(i);
        break;
      }
      name = templ.substr(i + 2, close - i - 2);
      end = close + 1;
    } else {
      std::size_t j = i + 1;
      while (j < templ.size() && is_identifier_char(templ[j]))
        ++j;
      name = templ.substr(i + 1, j - i - 1);
      end = j;
    }
    std::string value;
    if (!name.empty() && lookup(name, fields, value)) {
      out += value;
    } else {
      out += templ.substr(i, end - i);
    }
    i = end;
  }
  return out;
}

std::string LinePrefixer::feed(std::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    auto newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      bytes = {};
    } else {
      pending_.append(bytes.substr(0, newline + 1));
      bytes.remove_prefix(newline + 1);
      out += prefix_;
      out += pending_;
      pending_.clear();
      continue;
    }
    while (pending_.size() >= max_line_) {
      out += prefix_;
      out.append(pending_, 0, max_line_);
      out += '\n';
      pending_.erase(0, max_line_);
    }
  }
  return out;
}

std::string LinePrefixer::finish() {
  if (pending_.empty())
    return {};
  std::string out = prefix_ + pending_ + "\n";
  pending_.clear();
  return out;
}

}  // namespace ddprun::agent
