// Typed, located reading of a JSON document (simdjson DOM). The first problem found is kept
// as an Error naming the source and the JSON pointer; later reads are no-ops, so readers can
// be written as straight-line code that checks `failed()` at natural boundaries.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "paramlayout/error.hpp"

namespace paramlayout::json {

using Element = simdjson::dom::element;

/// A JSON pointer built on the stack; rendered only when an error needs it.
class Path {
 public:
  Path() = default;
  Path field(std::string_view key) const { return Path(this, key, 0, false); }
  Path item(std::size_t index) const { return Path(this, {}, index, true); }
  /// RFC 6901 text, "" for the root.
  std::string pointer() const;

 private:
  Path(const Path* parent, std::string_view key, std::size_t index, bool is_index)
      : parent_(parent), key_(key), index_(index), is_index_(is_index) {}
  const Path* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = 0;
  bool is_index_ = false;
};

/// The parsed document plus the sticky first error.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  /// Parses `text`; on a syntax error records it (with line and column) and returns false.
  bool parse(std::string_view text);
  Element root() const { return root_; }

  bool failed() const { return error_.has_value(); }
  const Error& error() const { return *error_; }
  /// Records `what` at `path` unless an error is already recorded.
  void fail(const Path& path, std::string_view what);
  /// Records "expected <what>, got <value>".
  void expected(const Path& path, std::string_view what, Element got);

  bool is_object(Element e, const Path& path);
  bool is_array(Element e, const Path& path);
  std::int64_t integer(Element e, const Path& path, std::int64_t min, std::int64_t max);
  /// An integer in [min, max], or null.
  std::optional<std::int64_t> integer_or_null(Element e, const Path& path, std::int64_t min,
                                              std::int64_t max);
  std::string_view string(Element e, const Path& path, bool non_empty = false);
  std::optional<std::string> string_or_null(Element e, const Path& path);
  bool boolean(Element e, const Path& path);
  /// The value as short JSON text for messages ("an array", "an object", or the literal).
  static std::string describe(Element e);

  std::string_view source() const { return source_; }

 private:
  std::string_view source_;
  simdjson::dom::parser parser_;
  Element root_;
  std::optional<Error> error_;
};

/// Walks an object's members, rejecting duplicate keys among `known` (unknown keys are
/// ignored, as docs/formats.md asks of readers) and reporting a missing `required` key.
/// `on_member(slot, value, path)` gets the position of the key in `known`.
template <class OnMember>
void read_members(Reader& reader, Element object, const Path& path,
                  std::initializer_list<std::string_view> known,
                  std::initializer_list<std::string_view> required, OnMember&& on_member) {
  if (!reader.is_object(object, path)) return;
  std::uint64_t seen = 0;
  for (auto [key, value] : simdjson::dom::object(object)) {
    std::size_t slot = 0;
    for (std::string_view name : known) {
      if (name == key) break;
      ++slot;
    }
    if (slot == known.size()) continue;
    const Path member = path.field(key);
    if (seen & (std::uint64_t{1} << slot)) {
      reader.fail(member, "duplicate key");
      return;
    }
    seen |= std::uint64_t{1} << slot;
    on_member(slot, value, member);
    if (reader.failed()) return;
  }
  for (std::string_view name : required) {
    std::size_t slot = 0;
    for (std::string_view k : known) {
      if (k == name) break;
      ++slot;
    }
    if (!(seen & (std::uint64_t{1} << slot))) {
      reader.fail(path, "missing required key \"" + std::string(name) + "\"");
      return;
    }
  }
}

/// Checks a `schema` value names `format` at major version 1 ("paramlayout.manifest/v1",
/// minor versions "v1.N" accepted). `other_format` is the sibling format, for a hint.
void check_schema_id(Reader& reader, Element value, const Path& path, std::string_view format,
                     std::string_view other_format);

/// Checks the parsed document is an object whose `schema` names `format` (check_schema_id);
/// false, with the error recorded, when it is not.
bool check_document_schema(Reader& reader, std::string_view format, std::string_view other_format);

}  // namespace paramlayout::json
