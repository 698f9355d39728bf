#include "paramlayout/memory_term.hpp"

#include <limits>

namespace paramlayout {

std::string_view to_string(Exactness exactness) {
  return exactness == Exactness::exact ? "exact" : "estimate";
}

std::optional<std::int64_t> total_bytes(const std::vector<MemoryTerm>& terms) {
  std::int64_t sum = 0;
  for (const MemoryTerm& t : terms) {
    if (t.bytes < 0 || t.bytes > std::numeric_limits<std::int64_t>::max() - sum) {
      return std::nullopt;
    }
    sum += t.bytes;
  }
  return sum;
}

}  // namespace paramlayout
