#include "hf_reader.hpp"

#include "hf_defaults.hpp"

#include <fmt/format.h>

namespace paramlayout::hf {

Config::Config(json::Reader& reader, std::string_view architecture, std::string_view scope,
               bool tie_in_scope)
    : reader_(reader),
      architecture_(architecture),
      object_(reader.root()),
      base_(scope.empty() ? root_ : root_.field(scope)),
      tie_in_scope_(tie_in_scope) {
  const auto model_type = [](json::Element object) {
    std::string_view type;
    return object.is_object() && object.at_key("model_type").get(type) == simdjson::SUCCESS
               ? std::string(type)
               : std::string();
  };
  model_type_ = model_type(object_);
  if (scope.empty()) return;
  auto inner = reader.root().at_key(scope);
  if (inner.error()) {
    reader.fail(root_, fmt::format("missing required key \"{}\" (the language model's config, "
                                   "for {})",
                                   scope, architecture));
    return;
  }
  if (reader.is_object(inner.value(), base_)) object_ = inner.value();
  const std::string parent = model_type_;
  model_type_ = model_type(object_);
  if (model_type_.empty()) model_type_ = std::string(sub_config_type(parent, scope));
}

simdjson::simdjson_result<json::Element> Config::lookup(std::string_view key) const {
  if (key == "tie_word_embeddings" && !tie_in_scope_) {
    auto top = reader_.root().at_key(key);
    if (!top.error()) return top;
  }
  auto value = object_.at_key(key);
  if (value.error() == simdjson::NO_SUCH_FIELD && !model_type_.empty()) {
    if (const std::optional<json::Element> fallback = class_default(model_type_, key)) {
      return json::Element(*fallback);
    }
  }
  return value;
}

std::optional<json::Element> Config::find(std::string_view key) {
  read_.emplace(key);
  auto value = lookup(key);
  if (value.error() || value.value().is_null()) return std::nullopt;
  return value.value();
}

bool Config::in_file(std::string_view key) {
  read_.emplace(key);
  return !object_.at_key(key).error();
}

bool Config::is_null(std::string_view key) {
  read_.emplace(key);
  auto value = lookup(key);
  return !value.error() && value.value().is_null();
}

std::int64_t Config::integer(std::string_view key, std::int64_t min) {
  std::optional<json::Element> e = find(key);
  if (!e) {
    reader_.fail(base_, fmt::format("missing required key \"{}\" (for {})", key, architecture_));
    return min;
  }
  return reader_.integer(*e, path(key), min, kMaxDimension);
}

std::int64_t Config::integer(std::string_view key, std::int64_t fallback, std::int64_t min) {
  return has(key) ? integer(key, min) : fallback;
}

bool Config::boolean(std::string_view key, bool fallback) {
  std::optional<json::Element> e = find(key);
  return e ? reader_.boolean(*e, path(key)) : fallback;
}

double Config::number(std::string_view key, double fallback) {
  std::optional<json::Element> e = find(key);
  if (!e) return fallback;
  double value = 0;
  if (e->get(value) != simdjson::SUCCESS) {
    reader_.expected(path(key), "a number", *e);
    return fallback;
  }
  return value;
}

std::string Config::string(std::string_view key, std::string_view fallback) {
  std::optional<json::Element> e = find(key);
  return e ? std::string(reader_.string(*e, path(key))) : std::string(fallback);
}

std::vector<std::int64_t> Config::integers(std::string_view key) {
  std::vector<std::int64_t> out;
  std::optional<json::Element> e = find(key);
  const json::Path at = path(key);
  if (!e || !reader_.is_array(*e, at)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(*e)) {
    out.push_back(reader_.integer(item, at.item(i++), 0, kMaxDimension));
  }
  return out;
}

std::vector<bool> Config::booleans(std::string_view key) {
  std::vector<bool> out;
  std::optional<json::Element> e = find(key);
  const json::Path at = path(key);
  if (!e || !reader_.is_array(*e, at)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(*e)) {
    out.push_back(reader_.boolean(item, at.item(i++)));
  }
  return out;
}

std::vector<std::string> Config::strings(std::string_view key) {
  std::vector<std::string> out;
  std::optional<json::Element> e = find(key);
  const json::Path at = path(key);
  if (!e || !reader_.is_array(*e, at)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(*e)) {
    out.emplace_back(reader_.string(item, at.item(i++)));
  }
  return out;
}

void Config::fail(std::string_view key, std::string_view what) { reader_.fail(path(key), what); }

}  // namespace paramlayout::hf
