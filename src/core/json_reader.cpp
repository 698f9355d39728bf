#include "json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace paramlayout::json {
namespace {

void append_pointer_token(std::string& out, std::string_view token) {
  out += '/';
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
}

// Finds where a document simdjson rejected goes wrong, for the message only: nlohmann
// reports syntax errors with line and column, and numbers simdjson cannot hold are
// found by walking the document with their JSON pointers.
class ProblemFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string problem;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos) {
      problem = fmt::format("{}: integer out of 64-bit range: {}", pointer(), text);
      return false;
    }
    return value();
  }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    frames_.push_back({true, 0, {}});
    return true;
  }
  bool key(string_t& key) override {
    frames_.back().key = key;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    frames_.push_back({false, 0, {}});
    return true;
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string_view what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 11: syntax error ..."
    if (auto pos = what.find("] "); pos != std::string_view::npos) what.remove_prefix(pos + 2);
    if (what.starts_with("parse error at ")) what.remove_prefix(15);
    for (unsigned char c : what) {
      if (c >= 0x20 && c < 0x7f) {
        problem += static_cast<char>(c);
      } else {
        problem += fmt::format("\\x{:02x}", c);
      }
    }
    return false;
  }

 private:
  struct Frame {
    bool object;
    std::size_t index;
    std::string key;
  };
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) {
      append_pointer_token(out, f.object ? f.key : std::to_string(f.index));
    }
    return out;
  }
  std::vector<Frame> frames_;
};

}  // namespace

std::string Path::pointer() const {
  std::vector<const Path*> chain;
  for (const Path* p = this; p != nullptr && p->parent_ != nullptr; p = p->parent_) {
    chain.push_back(p);
  }
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Path& p = **it;
    append_pointer_token(out, p.is_index_ ? std::to_string(p.index_) : std::string(p.key_));
  }
  return out;
}

bool Reader::parse(std::string_view text) {
  if (parser_.parse(text.data(), text.size()).get(root_) == simdjson::SUCCESS) return true;
  ProblemFinder finder;
  nlohmann::json::sax_parse(text, &finder);
  if (finder.problem.empty()) finder.problem = "not valid JSON";
  error_ = Error{fmt::format("{}: {}", source_, finder.problem)};
  return false;
}

void Reader::fail(const Path& path, std::string_view what) {
  if (!error_) error_ = error_at(source_, path.pointer(), what);
}

void Reader::expected(const Path& path, std::string_view what, Element got) {
  if (!error_) fail(path, fmt::format("expected {}, got {}", what, describe(got)));
}

std::string Reader::describe(Element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "an array";
    case simdjson::dom::element_type::OBJECT:
      return "an object";
    default: {
      std::string text = simdjson::minify(e);
      constexpr std::size_t kMax = 60;
      if (text.size() > kMax) text = text.substr(0, kMax - 3) + "...";
      return text;
    }
  }
}

bool Reader::is_object(Element e, const Path& path) {
  if (failed()) return false;
  if (e.is_object()) return true;
  expected(path, "an object", e);
  return false;
}

bool Reader::is_array(Element e, const Path& path) {
  if (failed()) return false;
  if (e.is_array()) return true;
  expected(path, "an array", e);
  return false;
}

std::int64_t Reader::integer(Element e, const Path& path, std::int64_t min, std::int64_t max) {
  if (failed()) return min;
  auto describe_range = [&] {
    if (max == std::numeric_limits<std::int64_t>::max()) {
      return fmt::format("an integer >= {}", min);
    }
    return fmt::format("an integer in [{}, {}]", min, max);
  };
  if (e.is_int64()) {
    std::int64_t v = e.get_int64().value_unsafe();
    if (v >= min && v <= max) return v;
  }
  if (e.is_uint64() && !e.is_int64()) {
    fail(path, fmt::format("expected {}, got {} (more than 64 bits)", describe_range(),
                           describe(e)));
    return min;
  }
  expected(path, describe_range(), e);
  return min;
}

std::optional<std::int64_t> Reader::integer_or_null(Element e, const Path& path,
                                                    std::int64_t min, std::int64_t max) {
  if (e.is_null()) return std::nullopt;
  return integer(e, path, min, max);
}

std::string_view Reader::string(Element e, const Path& path, bool non_empty) {
  if (failed()) return {};
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) {
    expected(path, non_empty ? "a non-empty string" : "a string", e);
  } else if (non_empty && s.empty()) {
    expected(path, "a non-empty string", e);
  }
  return s;
}

std::optional<std::string> Reader::string_or_null(Element e, const Path& path) {
  if (e.is_null()) return std::nullopt;
  return std::string(string(e, path));
}

bool Reader::boolean(Element e, const Path& path) {
  if (failed()) return false;
  bool b = false;
  if (e.get_bool().get(b) != simdjson::SUCCESS) expected(path, "true or false", e);
  return b;
}

void check_schema_id(Reader& reader, Element value, const Path& path, std::string_view format,
                     std::string_view other_format) {
  std::string_view id = reader.string(value, path);
  if (reader.failed()) return;
  const std::string prefix = std::string(format) + "/v";
  if (id.starts_with(prefix)) {
    auto is_number = [](std::string_view s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    std::string_view version = id.substr(prefix.size());
    const std::size_t dot = version.find('.');
    std::string_view major = version.substr(0, dot);
    const bool minor_ok = dot == std::string_view::npos || is_number(version.substr(dot + 1));
    if (major == "1" && minor_ok) return;
    if (is_number(major) && major != "1" && minor_ok) {
      reader.fail(path, fmt::format("unsupported version \"{}\": this paramlayout reads {}/v1",
                                    id, format));
      return;
    }
  }
  std::string hint;
  if (id.starts_with(std::string(other_format) + "/")) {
    hint = fmt::format(" (this file is a {}, not a {})",
                       other_format.substr(other_format.find('.') + 1),
                       format.substr(format.find('.') + 1));
  }
  reader.fail(path, fmt::format("expected \"{}/v1\", got \"{}\"{}", format, id, hint));
}

}  // namespace paramlayout::json
