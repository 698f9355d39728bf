#include "arg_map.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace paramlayout::job {
namespace {

/// At most this many characters of an argument's value in messages.
std::string shown(std::string_view value) {
  constexpr std::size_t kMax = 60;
  if (value.size() <= kMax) return fmt::format("'{}'", value);
  return fmt::format("'{}...' ({} characters)", value.substr(0, kMax), value.size());
}

/// argparse's negative-number pattern: -5, -.5, -1.5 are values, not options.
bool negative_number(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') return false;
  const std::string_view rest = s.substr(1);
  const std::size_t dot = rest.find('.');
  const auto all_digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  };
  if (dot == std::string_view::npos) return all_digits(rest);
  return all_digits(rest.substr(0, dot)) && rest.size() > dot + 1 &&
         all_digits(rest.substr(dot + 1));
}

/// One launch-line token as argparse's _parse_optional classifies it.
struct Token {
  const ArgumentInfo *argument = nullptr;     ///< a known option
  std::string option;                         ///< the option string (known or not)
  std::optional<std::string> explicit_value;  ///< "--name=value"
  bool is_option = false;                     ///< an option, known or not; else a value
};

Token classify(std::string_view s) {
  Token t;
  if (s.size() < 2 || s[0] != '-') return t;
  if (const ArgumentInfo *a = find_argument(s)) {
    t = {a, std::string(s), std::nullopt, true};
    return t;
  }
  if (const std::size_t eq = s.find('='); eq != std::string_view::npos) {
    if (const ArgumentInfo *a = find_argument(s.substr(0, eq))) {
      t = {a, std::string(s.substr(0, eq)), std::string(s.substr(eq + 1)), true};
      return t;
    }
  }
  if (negative_number(s) || s.find(' ') != std::string_view::npos) return t;
  t.is_option = true;
  t.option = std::string(s.substr(0, s.find('=')));
  return t;
}

std::string expected_values(const ArgumentInfo &a) {
  if (a.nargs.empty()) return "expected one argument";
  if (a.nargs == "+") return "expected at least one argument";
  return fmt::format("expected {} argument{}", a.nargs, a.nargs == "1" ? "" : "s");
}

}  // namespace

Result<ArgMap> ArgMap::parse(const std::vector<std::string> &args) {
  ArgMap map;
  std::vector<Token> tokens;
  bool values_only = false;  // after "--", every token is a value
  for (const std::string &arg : args) {
    if (!values_only && arg == "--") {
      values_only = true;
      tokens.emplace_back();
      tokens.back().option = "--";
      continue;
    }
    tokens.push_back(values_only ? Token{} : classify(arg));
  }
  std::vector<std::string> unknown;
  const auto error = [](const ArgumentInfo &a, std::string_view what) {
    return Error{
        fmt::format("{}: {} (Megatron-LM's argument parser refuses it)", a.display_name(), what)};
  };
  std::size_t i = 0;
  while (i < args.size()) {
    const Token &t = tokens[i];
    if (t.option == "--" && !t.is_option) {
      ++i;
      continue;
    }
    if (!t.is_option) {
      std::string what = fmt::format("{} (a value no argument takes", shown(args[i]));
      if (i > 0 && tokens[i - 1].argument != nullptr) {
        const ArgumentInfo &before = *tokens[i - 1].argument;
        what += before.max_values() == 0
                    ? fmt::format(": {} takes none", tokens[i - 1].option)
                    : fmt::format(
                          ": {} takes {}", tokens[i - 1].option,
                          before.nargs.empty() ? std::string("one") : std::string(before.nargs));
      }
      unknown.push_back(what + ")");
      ++i;
      continue;
    }
    if (t.argument == nullptr) {
      unknown.push_back(fmt::format("{} (did you mean {}?)", t.option, closest_argument(t.option)));
      ++i;
      continue;
    }
    const ArgumentInfo &a = *t.argument;
    std::vector<std::string> given;
    const std::size_t position = i++;
    const std::optional<std::int64_t> most = a.max_values();
    if (t.explicit_value) {
      if (most == 0)
        return error(a, fmt::format("ignored explicit argument {}", shown(*t.explicit_value)));
      if (a.min_values() > 1) return error(a, expected_values(a));
      given.push_back(*t.explicit_value);
    } else {
      while (i < args.size() && !tokens[i].is_option && tokens[i].option != "--" &&
             (!most || static_cast<std::int64_t>(given.size()) < *most)) {
        given.push_back(args[i++]);
      }
      if (static_cast<std::int64_t>(given.size()) < a.min_values()) {
        return error(a, expected_values(a));
      }
    }
    std::vector<std::string> converted;
    for (const std::string &v : given) {
      std::string why;
      std::optional<std::string> value = convert_value(a, v, why);
      if (!value) return error(a, why);
      converted.push_back(std::move(*value));
    }
    if (a.exclusive_group != 0) {
      for (const auto &[other, entry] : map.entries_) {
        if (other != &a && other->exclusive_group == a.exclusive_group) {
          return error(a, fmt::format("not allowed with argument {}", other->display_name()));
        }
      }
    }
    Entry &entry = map.entries_[&a];
    if (a.action() != ArgAction::append) entry.values.clear();  // the last occurrence wins
    entry.values.insert(entry.values.end(), converted.begin(), converted.end());
    entry.given_as = t.option;
    entry.position = position;
  }
  if (!unknown.empty()) {
    return Error{fmt::format("Megatron-LM's argument parser does not know {}: {}",
                             unknown.size() == 1 ? "this argument" : "these arguments",
                             fmt::join(unknown, ", "))};
  }
  return map;
}

ArgMap::Entry *ArgMap::find(std::string_view name) {
  const ArgumentInfo *a = find_argument(name);
  if (a == nullptr) {
    fail(name,
         "paramlayout reads an argument Megatron-LM does not have (a bug "
         "in paramlayout)");
    return nullptr;
  }
  auto it = entries_.find(a);
  if (it == entries_.end()) return nullptr;
  it->second.read = true;
  return &it->second;
}

bool ArgMap::has(std::string_view name) { return find(name) != nullptr; }

bool ArgMap::flag(std::string_view name) {
  Entry *e = find(name);
  if (e == nullptr) return false;
  // --x and --no-x are one argument; the flag is the form last given.
  return find_argument(name)->action() != ArgAction::boolean_optional || e->given_as == name;
}

std::optional<std::string> ArgMap::string(std::string_view name) {
  Entry *e = find(name);
  if (e == nullptr || e->values.empty()) return std::nullopt;
  if (e->values.size() != 1) {
    fail(name, fmt::format("expected one value, got {}", e->values.size()));
    return std::nullopt;
  }
  return e->values.front();
}

std::optional<std::vector<std::string>> ArgMap::values(std::string_view name) {
  Entry *e = find(name);
  if (e == nullptr) return std::nullopt;
  return e->values;
}

std::optional<std::int64_t> ArgMap::maybe_integer(std::string_view name, std::int64_t min,
                                                  std::int64_t max) {
  std::optional<std::string> text = string(name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const char *end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) {
    fail(name, fmt::format("expected an integer in [{}, {}], got {}", min, max, shown(*text)));
    return std::nullopt;
  }
  return value;
}

std::optional<double> ArgMap::maybe_real(std::string_view name) {
  const std::optional<std::string> text = string(name);
  if (!text) return std::nullopt;
  char *end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || *end != '\0') {
    fail(name, fmt::format("expected a number, got {}", shown(*text)));
    return std::nullopt;
  }
  return value;
}

std::int64_t ArgMap::integer(std::string_view name, std::int64_t fallback, std::int64_t min,
                             std::int64_t max) {
  return maybe_integer(name, min, max).value_or(fallback);
}

void ArgMap::fail(std::string_view name, std::string_view what) {
  if (!error_) error_ = Error{fmt::format("{}: {}", name, what)};
}

std::vector<std::string> ArgMap::modelopt_arguments() const {
  std::vector<std::pair<std::size_t, std::string>> rows;
  for (const auto &[argument, entry] : entries_) {
    if (argument->modelopt) rows.emplace_back(entry.position, entry.given_as);
  }
  std::sort(rows.begin(), rows.end());
  std::vector<std::string> out;
  for (auto &row : rows) out.push_back(std::move(row.second));
  return out;
}

std::vector<std::string> ArgMap::unread() const {
  std::vector<std::pair<std::size_t, std::string>> rows;
  for (const auto &[argument, entry] : entries_) {
    if (entry.read) continue;
    std::string text = entry.given_as;
    for (const std::string &v : entry.values) text += " " + v;
    rows.emplace_back(entry.position, std::move(text));
  }
  std::sort(rows.begin(), rows.end());
  std::vector<std::string> out;
  for (auto &row : rows) out.push_back(std::move(row.second));
  return out;
}

}  // namespace paramlayout::job
