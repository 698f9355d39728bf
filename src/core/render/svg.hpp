// Writing SVG text.
#pragma once

#include <string>
#include <string_view>

namespace paramlayout::render {

/// `text` as XML character data: markup escaped, control characters (which XML cannot
/// hold, even escaped) replaced by '?'.
inline std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' ? '?' : c;
    }
  }
  return out;
}

}  // namespace paramlayout::render
