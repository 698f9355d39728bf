// Appending JSON text to a std::string quickly: no format strings on the hot path.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace paramlayout::json {

/// Appends JSON tokens to a string.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  Writer& raw(std::string_view text) {
    out_.append(text);
    return *this;
  }
  Writer& integer(std::int64_t value) {
    const fmt::format_int digits(value);
    out_.append(digits.data(), digits.size());
    return *this;
  }
  Writer& boolean(bool value) { return raw(value ? "true" : "false"); }
  /// `text` as a JSON string literal, quotes and escapes included.
  Writer& quoted(std::string_view text);
  Writer& optional(const std::optional<std::int64_t>& value) {
    return value ? integer(*value) : raw("null");
  }
  Writer& optional(const std::optional<std::string>& value) {
    return value ? quoted(*value) : raw("null");
  }

 private:
  std::string& out_;
};

}  // namespace paramlayout::json
