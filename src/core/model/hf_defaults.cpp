#include "hf_defaults.hpp"

#include <map>
#include <memory>
#include <vector>

namespace paramlayout::hf {
namespace {

struct ClassDefaults {
  std::string_view model_type;
  std::string_view json;  ///< an object: key -> default
};

constexpr ClassDefaults kDefaults[] = {
#define PARAMLAYOUT_HF_DEFAULTS
#include "hf_defaults.inc"
#undef PARAMLAYOUT_HF_DEFAULTS
};

struct SubConfig {
  std::string_view model_type;
  std::string_view scope;
  std::string_view sub_type;
};

constexpr SubConfig kSubConfigs[] = {
    {"", "", ""},  // the table may list none
#define PARAMLAYOUT_HF_SUB_CONFIGS
#include "hf_defaults.inc"
#undef PARAMLAYOUT_HF_SUB_CONFIGS
};

/// Each class's defaults, parsed once (the table is generated: it always parses).
const std::map<std::string_view, json::Element>& parsed() {
  static std::vector<std::unique_ptr<simdjson::dom::parser>> parsers;  // keep the documents
  static const std::map<std::string_view, json::Element> table = [] {
    std::map<std::string_view, json::Element> out;
    for (const ClassDefaults& d : kDefaults) {
      auto& parser = parsers.emplace_back(std::make_unique<simdjson::dom::parser>());
      json::Element root;
      if (parser->parse(d.json.data(), d.json.size()).get(root) == simdjson::SUCCESS) {
        out.emplace(d.model_type, root);
      }
    }
    return out;
  }();
  return table;
}

}  // namespace

std::optional<json::Element> class_default(std::string_view model_type, std::string_view key) {
  const auto& table = parsed();
  const auto found = table.find(model_type);
  if (found == table.end()) return std::nullopt;
  json::Element value;
  if (found->second.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

std::string_view sub_config_type(std::string_view model_type, std::string_view scope) {
  for (const SubConfig& s : kSubConfigs) {
    if (s.model_type == model_type && s.scope == scope) return s.sub_type;
  }
  return {};
}

}  // namespace paramlayout::hf
