#include "paramlayout/error.hpp"

#include <fmt/format.h>

namespace paramlayout {
namespace {

/// Length of the valid UTF-8 sequence at the start of `text`, or 0.
std::size_t utf8_length(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t n = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
  } else {
    return 0;
  }
  if (text.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  return n;
}

/// Appends `text` with control characters and invalid UTF-8 escaped.
void append_printable(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_length(text.substr(i)) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
}

/// Moves `at` back to the start of a UTF-8 sequence, so a cut never splits a character.
std::size_t char_boundary(std::string_view text, std::size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) {
    --at;
  }
  return at;
}

}  // namespace

Error error_at(std::string_view source, std::string_view pointer, std::string_view what) {
  if (pointer.empty()) return Error{fmt::format("{}: {}", source, what)};
  return Error{fmt::format("{}: {}: {}", source, pointer, what)};
}

std::string excerpt(std::string_view text, std::size_t max) {
  std::string out;
  if (text.size() <= max) {
    append_printable(out, text);
    return out;
  }
  const std::size_t head = char_boundary(text, (max - 3) * 2 / 3);
  const std::size_t tail = char_boundary(text, text.size() - (max - 3 - head));
  append_printable(out, text.substr(0, head));
  out += "...";
  append_printable(out, text.substr(tail));
  return out;
}

}  // namespace paramlayout
