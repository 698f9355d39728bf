#include "argument_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_map>

namespace paramlayout::job {
namespace {

constexpr ArgumentInfo kArguments[] = {
#include "megatron_arguments.inc"
};

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  for (std::size_t start = 0;;) {
    const std::size_t bar = text.find('|', start);
    out.push_back(text.substr(start, bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

const std::unordered_map<std::string_view, const ArgumentInfo *> &by_name() {
  static const auto map = [] {
    std::unordered_map<std::string_view, const ArgumentInfo *> m;
    for (const ArgumentInfo &a : kArguments) {
      for (std::string_view name : split(a.option_strings)) m.emplace(name, &a);
    }
    return m;
  }();
  return map;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view strip(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

/// Digits with single underscores between them, as Python's int() and float()
/// take them.
bool digits(std::string_view s, std::string *out) {
  if (s.empty() || s.front() == '_' || s.back() == '_') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (s[i + 1] == '_') return false;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    if (out != nullptr) *out += s[i];
  }
  return true;
}

/// Python's int(text) in decimal, or nullopt where int() raises.
std::optional<std::string> python_int(std::string_view text) {
  std::string_view s = strip(text);
  std::string sign;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    if (s.front() == '-') sign = "-";
    s.remove_prefix(1);
  }
  std::string number;
  if (!digits(s, &number)) return std::nullopt;
  const std::size_t first = number.find_first_not_of('0');
  if (first == std::string::npos) return std::string("0");
  return sign + number.substr(first);
}

/// Whether Python's float(text) accepts it.
bool python_float(std::string_view text) {
  std::string_view s = strip(text);
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  std::string lower(s);
  for (char &c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "infinity" || lower == "nan") return true;
  const std::size_t e = lower.find('e');
  const std::string_view mantissa = std::string_view(lower).substr(0, e);
  if (e != std::string::npos) {
    std::string_view exponent = std::string_view(lower).substr(e + 1);
    if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-')) {
      exponent.remove_prefix(1);
    }
    if (!digits(exponent, nullptr)) return false;
  }
  const std::size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return digits(mantissa, nullptr);
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view fraction = mantissa.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return false;
  return (whole.empty() || digits(whole, nullptr)) &&
         (fraction.empty() || digits(fraction, nullptr));
}

}  // namespace

ArgAction ArgumentInfo::action() const {
  static constexpr std::array<std::pair<std::string_view, ArgAction>, 8> kNames = {{
      {"store", ArgAction::store},
      {"store_true", ArgAction::store_true},
      {"store_false", ArgAction::store_false},
      {"store_const", ArgAction::store_const},
      {"append", ArgAction::append},
      {"append_const", ArgAction::append_const},
      {"count", ArgAction::count},
      {"boolean_optional", ArgAction::boolean_optional},
  }};
  for (const auto &[name, action] : kNames) {
    if (name == action_name) return action;
  }
  return ArgAction::store;
}

std::int64_t ArgumentInfo::min_values() const {
  if (nargs.empty()) return 1;
  if (nargs == "?" || nargs == "*") return 0;
  if (nargs == "+") return 1;
  return std::stoll(std::string(nargs));
}

std::optional<std::int64_t> ArgumentInfo::max_values() const {
  if (nargs.empty() || nargs == "?") return 1;
  if (nargs == "*" || nargs == "+") return std::nullopt;
  return std::stoll(std::string(nargs));
}

std::vector<std::string_view> ArgumentInfo::names() const { return split(option_strings); }

std::string ArgumentInfo::display_name() const {
  std::string out(option_strings);
  std::replace(out.begin(), out.end(), '|', '/');
  return out;
}

std::span<const ArgumentInfo> megatron_arguments() { return kArguments; }

const ArgumentInfo *find_argument(std::string_view name) {
  const auto it = by_name().find(name);
  return it == by_name().end() ? nullptr : it->second;
}

std::string_view closest_argument(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = std::string_view::npos;
  for (const ArgumentInfo &a : kArguments) {
    for (std::string_view candidate : split(a.option_strings)) {
      const std::size_t d = edit_distance(name, candidate);
      if (d < best_distance) {
        best_distance = d;
        best = candidate;
      }
    }
  }
  return best;
}

std::optional<std::string> convert_value(const ArgumentInfo &arg, std::string_view value,
                                         std::string &error) {
  std::string converted(value);
  if (arg.type == "int") {
    std::optional<std::string> n = python_int(value);
    if (!n) {
      error = fmt::format("invalid int value: '{}'", value);
      return std::nullopt;
    }
    converted = *n;
  } else if (arg.type == "float" && !python_float(value)) {
    error = fmt::format("invalid float value: '{}'", value);
    return std::nullopt;
  }
  if (!arg.choices.empty()) {
    const std::vector<std::string_view> choices = split(arg.choices);
    if (std::find(choices.begin(), choices.end(), converted) == choices.end()) {
      std::vector<std::string> quoted;
      for (std::string_view c : choices) quoted.push_back(fmt::format("'{}'", c));
      error = fmt::format("invalid choice: '{}' (choose from {})", value, fmt::join(quoted, ", "));
      return std::nullopt;
    }
  }
  return converted;
}

}  // namespace paramlayout::job
