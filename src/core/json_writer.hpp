// Small helpers for writing JSON text quickly with fmt.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace paramlayout::json {

/// Appends `text` as a JSON string literal, quotes and escapes included.
void append_quoted(fmt::memory_buffer& out, std::string_view text);

/// Appends an integer, or `null`.
void append_optional(fmt::memory_buffer& out, const std::optional<std::int64_t>& value);

/// Appends a string literal, or `null`.
void append_optional(fmt::memory_buffer& out, const std::optional<std::string>& value);

}  // namespace paramlayout::json
