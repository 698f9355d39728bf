// Numbers written for people.
#pragma once

#include <cstdint>
#include <string>

namespace paramlayout {

/// 1234567 -> "1,234,567".
std::string group_digits(std::int64_t value);

/// Bytes as "14.96 GiB", "512.00 KiB", "12 B".
std::string human_bytes(double bytes);

}  // namespace paramlayout
