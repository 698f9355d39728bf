#include "hf_reader.hpp"

#include <fmt/format.h>

namespace paramlayout::hf {

std::optional<json::Element> Config::find(std::string_view key) {
  read_.emplace(key);
  auto value = reader_.root().at_key(key);
  if (value.error() || value.value().is_null()) return std::nullopt;
  return value.value();
}

bool Config::is_null(std::string_view key) {
  read_.emplace(key);
  auto value = reader_.root().at_key(key);
  return !value.error() && value.value().is_null();
}

std::int64_t Config::integer(std::string_view key, std::int64_t min) {
  std::optional<json::Element> e = find(key);
  if (!e) {
    reader_.fail(json::Path(),
                 fmt::format("missing required key \"{}\" (for {})", key, architecture_));
    return min;
  }
  return reader_.integer(*e, json::Path().field(key), min, kMaxDimension);
}

std::int64_t Config::integer(std::string_view key, std::int64_t fallback, std::int64_t min) {
  return has(key) ? integer(key, min) : fallback;
}

bool Config::boolean(std::string_view key, bool fallback) {
  std::optional<json::Element> e = find(key);
  return e ? reader_.boolean(*e, json::Path().field(key)) : fallback;
}

double Config::number(std::string_view key, double fallback) {
  std::optional<json::Element> e = find(key);
  if (!e) return fallback;
  double value = 0;
  if (e->get(value) != simdjson::SUCCESS) {
    reader_.expected(json::Path().field(key), "a number", *e);
    return fallback;
  }
  return value;
}

std::string Config::string(std::string_view key, std::string_view fallback) {
  std::optional<json::Element> e = find(key);
  return e ? std::string(reader_.string(*e, json::Path().field(key))) : std::string(fallback);
}

std::vector<std::int64_t> Config::integers(std::string_view key) {
  std::vector<std::int64_t> out;
  std::optional<json::Element> e = find(key);
  const json::Path root;
  const json::Path path = root.field(key);
  if (!e || !reader_.is_array(*e, path)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(*e)) {
    out.push_back(reader_.integer(item, path.item(i++), 0, kMaxDimension));
  }
  return out;
}

std::vector<std::string> Config::strings(std::string_view key) {
  std::vector<std::string> out;
  std::optional<json::Element> e = find(key);
  const json::Path root;
  const json::Path path = root.field(key);
  if (!e || !reader_.is_array(*e, path)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(*e)) {
    out.emplace_back(reader_.string(item, path.item(i++)));
  }
  return out;
}

void Config::fail(std::string_view key, std::string_view what) {
  const json::Path root;
  reader_.fail(root.field(key), what);
}

}  // namespace paramlayout::hf
