#include "json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace paramlayout::json {
namespace {

/// simdjson's limit on nested arrays and objects.
constexpr std::size_t kMaxDepth = simdjson::DEFAULT_MAX_DEPTH;

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
  bool number_float(number_float_t value, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos) {
      problem = located("integer out of 64-bit range: " + excerpt(text));
      return false;
    }
    if (!std::isfinite(value)) {
      problem = located("number out of range: " + excerpt(text));
      return false;
    }
    return this->value();
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
  bool parse_error(std::size_t, const std::string& token,
                   const nlohmann::detail::exception& ex) override {
    constexpr int kNumberOverflow = 406;
    if (ex.id == kNumberOverflow) {
      problem = located("number out of range: " + excerpt(token));
      return false;
    }
    std::string_view what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 11: syntax error ...
    // last read: '<token>'": the token may be a whole (long) string, so only its end is kept.
    if (auto pos = what.find("] "); pos != std::string_view::npos) what.remove_prefix(pos + 2);
    if (what.starts_with("parse error at ")) what.remove_prefix(15);
    constexpr std::string_view kLastRead = "; last read: '";
    const std::size_t last_read = what.find(kLastRead);
    problem = excerpt(what.substr(0, last_read), 2 * kMaxExcerpt);
    if (last_read != std::string_view::npos) {
      std::string_view read = what.substr(last_read + kLastRead.size());
      if (read.ends_with('\'')) read.remove_suffix(1);
      constexpr std::size_t kKept = 40;
      const bool cut = read.size() > kKept;
      if (cut) read.remove_prefix(read.size() - kKept);
      problem += fmt::format("{}{}{}'", kLastRead, cut ? "..." : "", excerpt(read));
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
  /// `what` after the JSON pointer of the value being read.
  std::string located(const std::string& what) const {
    const std::string at = pointer();
    return at.empty() ? what : at + ": " + what;
  }
  /// The JSON pointer of the value being read.
  std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) {
      append_pointer_token(out, f.object ? f.key : std::to_string(f.index));
    }
    return excerpt(out);
  }
  std::vector<Frame> frames_;
};

/// "line 3, column 7" of byte `offset` (both from 1, columns in bytes).
std::string location(std::string_view text, std::size_t offset) {
  const std::string_view before = text.substr(0, offset);
  const auto line = std::count(before.begin(), before.end(), '\n') + 1;
  const std::size_t line_start = before.rfind('\n');
  const std::size_t column =
      line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return fmt::format("line {}, column {}", line, column);
}

/// Where nesting first goes deeper than `max_depth` (strings skipped), or npos.
std::size_t too_deep_at(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

/// What is wrong with a text simdjson rejected with `code`, and where.
std::string syntax_problem(std::string_view text, simdjson::error_code code) {
  if (text.starts_with("\xEF\xBB\xBF")) {
    return "starts with a UTF-8 byte order mark (bytes EF BB BF), which JSON text must not "
           "have; save the file without it";
  }
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return fmt::format("{}: a NUL byte, which JSON text never holds (a binary or damaged file?)",
                       location(text, nul));
  }
  if (code == simdjson::DEPTH_ERROR) {
    const std::size_t at = too_deep_at(text, kMaxDepth);
    return fmt::format("{}nesting deeper than {} arrays and objects",
                       at == std::string_view::npos ? "" : location(text, at) + ": ", kMaxDepth);
  }
  ProblemFinder finder;
  nlohmann::json::sax_parse(text, &finder);
  if (!finder.problem.empty()) return finder.problem;
  return fmt::format("not valid JSON ({})", simdjson::error_message(code));
}

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
  const simdjson::error_code code = parser_.parse(text.data(), text.size()).get(root_);
  if (code == simdjson::SUCCESS) return true;
  error_ = Error{fmt::format("{}: {}", source_, syntax_problem(text, code))};
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
    default:
      return excerpt(simdjson::minify(e), 60);
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
    fail(path,
         fmt::format("expected {}, got {} (more than 64 bits)", describe_range(), describe(e)));
    return min;
  }
  expected(path, describe_range(), e);
  return min;
}

std::optional<std::int64_t> Reader::integer_or_null(Element e, const Path& path, std::int64_t min,
                                                    std::int64_t max) {
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
      return !s.empty() &&
             std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    std::string_view version = id.substr(prefix.size());
    const std::size_t dot = version.find('.');
    std::string_view major = version.substr(0, dot);
    const bool minor_ok = dot == std::string_view::npos || is_number(version.substr(dot + 1));
    if (major == "1" && minor_ok) return;
    if (is_number(major) && major != "1" && minor_ok) {
      reader.fail(path, fmt::format("unsupported version \"{}\": this paramlayout reads {}/v1",
                                    excerpt(id), format));
      return;
    }
  }
  std::string hint;
  if (id.starts_with(std::string(other_format) + "/")) {
    hint = fmt::format(" (this file is a {}, not a {})",
                       other_format.substr(other_format.find('.') + 1),
                       format.substr(format.find('.') + 1));
  }
  reader.fail(path, fmt::format("expected \"{}/v1\", got \"{}\"{}", format, excerpt(id), hint));
}

bool check_document_schema(Reader& reader, std::string_view format, std::string_view other_format) {
  const Path root;
  if (!reader.is_object(reader.root(), root)) return false;
  Element schema;
  if (reader.root().at_key("schema").get(schema) != simdjson::SUCCESS) {
    reader.fail(root, fmt::format("missing required key \"schema\" (\"{}/v1\")", format));
    return false;
  }
  check_schema_id(reader, schema, root.field("schema"), format, other_format);
  return !reader.failed();
}

}  // namespace paramlayout::json
