// One named part of a rank's memory: its bytes and whether Megatron-LM's code fixes them
// exactly or they are estimated; what each term is and where its figure comes from.
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
  std::string key;  ///< stable snake_case name, its key in job.json: "grad_buffers"
  std::int64_t bytes = 0;
  Exactness exactness = Exactness::exact;

  bool operator==(const MemoryTerm&) const = default;
};

/// What a term is and what its figure is derived from, by key.
struct MemoryTermInfo {
  std::string_view key;
  std::string_view what;    ///< for people: "DDP's grad buffers (padding included)"
  std::string_view source;  ///< "param_and_grad_buffer.py: _ParamAndGradBuffer"
  Exactness exactness = Exactness::exact;
};

/// Every term paramlayout counts, persistent ones first.
const std::vector<MemoryTermInfo>& memory_terms();

/// The term named `key`; nullptr for a key paramlayout does not count.
const MemoryTermInfo* find_memory_term(std::string_view key);

/// The sum of `terms`' bytes; nullopt when it does not fit in 64 bits.
std::optional<std::int64_t> total_bytes(const std::vector<MemoryTerm>& terms);

}  // namespace paramlayout
