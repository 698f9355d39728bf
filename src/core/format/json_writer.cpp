#include "json_writer.hpp"

namespace paramlayout::json {

Writer& Writer::quoted(std::string_view text) {
  out_.push_back('"');
  std::size_t plain = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out_.append(text.substr(plain, i - plain));
    switch (c) {
      case '"':
        out_.append("\\\"");
        break;
      case '\\':
        out_.append("\\\\");
        break;
      case '\n':
        out_.append("\\n");
        break;
      case '\t':
        out_.append("\\t");
        break;
      default:
        out_.append(fmt::format("\\u{:04x}", c));
        break;
    }
    plain = i + 1;
  }
  out_.append(text.substr(plain));
  out_.push_back('"');
  return *this;
}

}  // namespace paramlayout::json
