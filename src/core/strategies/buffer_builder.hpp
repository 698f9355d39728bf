// Writes one buffer's layout: its buckets and param slots, offsets checked against 64 bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "paramlayout/error.hpp"
#include "paramlayout/grouping.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::strategies {

/// Offsets are computed 128 bits wide, so a buffer that outgrows 64 bits is reported, never
/// wrapped.
__extension__ typedef __int128 Wide;

/// One buffer to lay out.
struct BufferJob {
  const Manifest& manifest;
  const BufferGroup& group;
  const PlanOptions& options;

  const Param& param(std::size_t k) const { return manifest.params[group.params[k]]; }
};

/// Fills a buffer's buckets and param slots (its key, strategy and shard count are the
/// caller's), remembering whether any offset passed 2^63 - 1.
class BufferBuilder {
 public:
  /// Empties `out`'s buckets and params, with room for `job`'s params.
  BufferBuilder(const BufferJob& job, BufferLayout& out);

  /// Places param `k` of the job at [start, start + numel) in bucket `bucket`.
  void place(std::size_t k, Wide start, std::int64_t bucket);
  void add_bucket(Wide start, Wide end, Wide numel_unpadded);
  /// Sets the buffer's size and unpadded size; an error where an offset does not fit in 64
  /// bits.
  Result<void> finish();

 private:
  BufferJob job_;  ///< a few references: copied, so a temporary job will do
  BufferLayout& out_;
  Wide max_offset_ = 0;
};

}  // namespace paramlayout::strategies
