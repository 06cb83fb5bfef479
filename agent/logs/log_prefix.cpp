#include "agent/logs/log_prefix.hpp"

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
  out.reserve(bytes.size() + prefix_.size());
  while (!bytes.empty()) {
    if (bytes.front() == '\n' && after_carriage_return_) {  // the '\n' of "\r\n": no new line
      out += '\n';
      after_carriage_return_ = false;
      line_open_ = false;
      bytes.remove_prefix(1);
      continue;
    }
    if (at_line_start_)
      out += prefix_;
    // Up to and including the next line break, in one piece.
    const auto brk = bytes.find_first_of("\r\n");
    const std::size_t length = brk == std::string_view::npos ? bytes.size() : brk + 1;
    out.append(bytes.substr(0, length));
    const char last = bytes[length - 1];
    after_carriage_return_ = last == '\r';
    at_line_start_ = last == '\n' || last == '\r';
    line_open_ = last != '\n';
    bytes.remove_prefix(length);
  }
  return out;
}

std::string LinePrefixer::end_line() {
  if (!line_open_)
    return {};
  line_open_ = false;
  at_line_start_ = true;
  after_carriage_return_ = false;
  return "\n";
}

std::vector<std::string> LineSplitter::feed(std::string_view bytes) {
  std::vector<std::string> lines;
  for (const char c : bytes) {
    if (c == '\n' && after_carriage_return_) {
      after_carriage_return_ = false;  // the second half of "\r\n"
      continue;
    }
    after_carriage_return_ = c == '\r';
    if (c == '\n' || c == '\r') {
      lines.push_back(std::move(pending_));
      pending_.clear();
      continue;
    }
    pending_ += c;
    if (pending_.size() >= max_line_) {
      lines.push_back(std::move(pending_));
      pending_.clear();
    }
  }
  return lines;
}

std::vector<std::string> LineSplitter::finish() {
  std::vector<std::string> lines;
  if (!pending_.empty())
    lines.push_back(std::move(pending_));
  pending_.clear();
  after_carriage_return_ = false;
  return lines;
}

}  // namespace ddprun::agent
