#include "paramlayout/error.hpp"

#include <fmt/format.h>

namespace paramlayout {

Error error_at(std::string_view source, std::string_view pointer, std::string_view what) {
  if (pointer.empty()) return Error{fmt::format("{}: {}", source, what)};
  return Error{fmt::format("{}: {}: {}", source, pointer, what)};
}

}  // namespace paramlayout
