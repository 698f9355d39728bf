#include "paramlayout/text.hpp"

#include <fmt/format.h>

#include <array>

namespace paramlayout {

std::string group_digits(std::int64_t value) {
  std::string digits = fmt::format("{}", value);
  const std::size_t first = digits[0] == '-' ? 1 : 0;
  for (std::size_t i = digits.size(); i > first + 3; i -= 3) digits.insert(i - 3, 1, ',');
  return digits;
}

std::string human_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t unit = 0;
  while (bytes >= 1024.0 && unit + 1 < kUnits.size()) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

}  // namespace paramlayout
