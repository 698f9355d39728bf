#include "json_writer.hpp"

#include <iterator>

namespace paramlayout::json {

void append_quoted(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  std::size_t plain = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.substr(plain, i - plain));
    switch (c) {
      case '"':
        out.append(std::string_view("\\\""));
        break;
      case '\\':
        out.append(std::string_view("\\\\"));
        break;
      case '\n':
        out.append(std::string_view("\\n"));
        break;
      case '\t':
        out.append(std::string_view("\\t"));
        break;
      default:
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        break;
    }
    plain = i + 1;
  }
  out.append(text.substr(plain));
  out.push_back('"');
}

void append_optional(fmt::memory_buffer& out, const std::optional<std::int64_t>& value) {
  if (value) {
    fmt::format_to(std::back_inserter(out), "{}", *value);
  } else {
    out.append(std::string_view("null"));
  }
}

void append_optional(fmt::memory_buffer& out, const std::optional<std::string>& value) {
  if (value) {
    append_quoted(out, *value);
  } else {
    out.append(std::string_view("null"));
  }
}

}  // namespace paramlayout::json
