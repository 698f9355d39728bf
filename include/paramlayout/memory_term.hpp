// One named part of a rank's memory: its bytes, whether Megatron-LM's code fixes them exactly
// or they are estimated, and where the figure is derived from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paramlayout {

/// Whether a figure is what Megatron-LM allocates, byte for byte, or an estimate.
enum class Exactness : std::uint8_t { exact, estimate };
std::string_view to_string(Exactness exactness);

/// One term of a rank's memory.
struct MemoryTerm {
  std::string key;   ///< stable snake_case name: the term's key in job.json ("grad_buffers")
  std::string what;  ///< for people: "grad buffers (float32, padding included)"
  std::int64_t bytes = 0;
  Exactness exactness = Exactness::exact;
  std::string source;  ///< what the figure is derived from: "param_and_grad_buffer.py:880"

  bool operator==(const MemoryTerm&) const = default;
};

/// The sum of `terms`' bytes; nullopt when it does not fit in 64 bits.
std::optional<std::int64_t> total_bytes(const std::vector<MemoryTerm>& terms);

}  // namespace paramlayout
