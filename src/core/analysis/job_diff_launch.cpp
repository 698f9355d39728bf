// Two launches compared: their arguments as people read them, and their configs field by field.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "format/json_reader.hpp"
#include "paramlayout/job_diff.hpp"

namespace paramlayout {
namespace {

/// `--flag`, or `-x` (not `-1`, a negative value).
bool is_flag(std::string_view token) {
  if (token.size() < 2 || token[0] != '-') return false;
  return token[1] == '-' || ((token[1] < '0' || token[1] > '9') && token[1] != '.');
}

/// Each argument with its values, in order of first appearance.
struct Arguments {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> values;  ///< one entry per occurrence

  void add(std::string name, std::string value) {
    auto [it, added] = values.try_emplace(name);
    if (added) order.push_back(std::move(name));
    it->second.push_back(std::move(value));
  }
};

Arguments group(const std::vector<std::string>& tokens) {
  Arguments out;
  std::string name;
  std::string value;
  bool open = false;
  const auto close = [&] {
    if (open) out.add(name, value);
    open = false;
  };
  for (const std::string& token : tokens) {
    if (is_flag(token)) {
      close();
      const std::size_t eq = token.find('=');
      name = token.substr(0, eq);
      value = eq == std::string::npos ? std::string() : token.substr(eq + 1);
      open = true;
    } else {
      if (!open) {  // a value before any flag: an argument of its own
        name.clear();
        value.clear();
        open = true;
      }
      if (!value.empty()) value += ' ';
      value += token;
    }
  }
  close();
  return out;
}

std::optional<std::string> joined(const Arguments& a, const std::string& name) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return std::nullopt;
  return fmt::format("{}", fmt::join(it->second, ", "));
}

/// Every member of an object, nested objects flattened to `a.b`; other values minified.
void flatten(json::Element e, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (e.type() != simdjson::dom::element_type::OBJECT) {
    out.emplace_back(prefix, simdjson::minify(e));
    return;
  }
  simdjson::dom::object object(e);
  if (object.size() == 0 && !prefix.empty()) {
    out.emplace_back(prefix, "{}");
    return;
  }
  for (auto [key, value] : object) {
    std::string name = prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
    flatten(value, name, out);
  }
}

Result<std::vector<std::pair<std::string, std::string>>> fields_of(std::string_view text,
                                                                   std::string_view source) {
  json::Reader reader(source);
  if (!reader.parse(text)) return reader.error();
  if (!reader.is_object(reader.root(), json::Path())) return reader.error();
  std::vector<std::pair<std::string, std::string>> out;
  flatten(reader.root(), "", out);
  return out;
}

}  // namespace

std::vector<ArgumentChange> diff_arguments(const std::vector<std::string>& before,
                                           const std::vector<std::string>& after) {
  const Arguments was = group(before);
  const Arguments now = group(after);
  std::vector<ArgumentChange> out;
  for (const std::string& name : now.order) {
    std::optional<std::string> a = joined(was, name);
    std::optional<std::string> b = joined(now, name);
    if (a != b) out.push_back({name, std::move(a), std::move(b)});
  }
  for (const std::string& name : was.order) {
    if (!now.values.count(name)) out.push_back({name, joined(was, name), std::nullopt});
  }
  return out;
}

Result<std::vector<ConfigFieldChange>> diff_json_fields(std::string_view before,
                                                        std::string_view before_source,
                                                        std::string_view after,
                                                        std::string_view after_source) {
  auto was = fields_of(before, before_source);
  if (!was) return was.error();
  auto now = fields_of(after, after_source);
  if (!now) return now.error();
  // A key given twice keeps its last value, as JSON readers (Python's json) take it.
  std::map<std::string_view, std::string_view> old_values;
  for (const auto& [key, value] : *was) old_values[key] = value;
  std::map<std::string_view, std::string_view> new_values;
  for (const auto& [key, value] : *now) new_values[key] = value;
  std::vector<ConfigFieldChange> out;
  for (const auto& [key, value] : *now) {
    if (new_values[key].data() != value.data()) continue;  // an earlier duplicate
    auto it = old_values.find(key);
    if (it == old_values.end()) {
      out.push_back({key, std::nullopt, value});
    } else if (it->second != value) {
      out.push_back({key, std::string(it->second), value});
    }
  }
  for (const auto& [key, value] : *was) {
    if (old_values[key].data() != value.data()) continue;
    if (!new_values.count(key)) out.push_back({key, value, std::nullopt});
  }
  return out;
}

bool ConfigDiff::differs() const {
  return before_given.has_value() != after_given.has_value() || before_sha256 != after_sha256;
}

}  // namespace paramlayout
