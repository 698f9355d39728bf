#include "arg_map.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace paramlayout::job {
namespace {

bool is_argument(std::string_view token) {
  return token.size() > 2 && token.substr(0, 2) == "--";
}

/// At most this many characters of an argument's value in messages.
std::string shown(std::string_view value) {
  constexpr std::size_t kMax = 60;
  if (value.size() <= kMax) return fmt::format("'{}'", value);
  return fmt::format("'{}...' ({} characters)", value.substr(0, kMax), value.size());
}

}  // namespace

Result<ArgMap> ArgMap::parse(const std::vector<std::string>& args) {
  ArgMap map;
  Entry* current = nullptr;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view token = args[i];
    if (!is_argument(token)) {
      if (current == nullptr) {
        return Error{fmt::format("Megatron-LM arguments: {} is not an argument (arguments start "
                                 "with --)",
                                 shown(token))};
      }
      current->values.emplace_back(token);
      continue;
    }
    std::optional<std::string_view> inline_value;
    if (std::size_t eq = token.find('='); eq != std::string_view::npos) {
      inline_value = token.substr(eq + 1);
      token = token.substr(0, eq);
    }
    Entry& entry = map.entries_[std::string(token)];
    entry.values.clear();  // argparse: the last occurrence wins
    entry.position = i;
    if (inline_value) entry.values.emplace_back(*inline_value);
    current = &entry;
  }
  return map;
}

ArgMap::Entry* ArgMap::find(std::string_view name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return nullptr;
  it->second.read = true;
  return &it->second;
}

bool ArgMap::has(std::string_view name) { return find(name) != nullptr; }

bool ArgMap::flag(std::string_view name) {
  Entry* e = find(name);
  if (e == nullptr) return false;
  if (!e->values.empty()) {
    fail(name, fmt::format("takes no value, got {}", shown(e->values.front())));
  }
  return true;
}

std::optional<std::string> ArgMap::string(std::string_view name) {
  Entry* e = find(name);
  if (e == nullptr) return std::nullopt;
  if (e->values.size() != 1) {
    fail(name, e->values.empty() ? std::string("expected a value")
                                 : fmt::format("expected one value, got {}", e->values.size()));
    return std::nullopt;
  }
  return e->values.front();
}

std::optional<std::int64_t> ArgMap::maybe_integer(std::string_view name, std::int64_t min,
                                                  std::int64_t max) {
  std::optional<std::string> text = string(name);
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) {
    fail(name, fmt::format("expected an integer in [{}, {}], got {}", min, max, shown(*text)));
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

std::vector<std::string> ArgMap::unread() const {
  std::vector<std::pair<std::size_t, std::string>> rows;
  for (const auto& [name, entry] : entries_) {
    if (entry.read) continue;
    std::string text = name;
    for (const std::string& v : entry.values) text += " " + v;
    rows.emplace_back(entry.position, std::move(text));
  }
  std::sort(rows.begin(), rows.end());
  std::vector<std::string> out;
  for (auto& row : rows) out.push_back(std::move(row.second));
  return out;
}

}  // namespace paramlayout::job
