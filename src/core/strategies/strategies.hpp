// The per-buffer layout strategies of strategies.md sections 2-4.
#pragma once

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/plan.hpp"

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

/// Collects a buffer's buckets and param slots, remembering whether any offset passed 2^63-1.
class BufferBuilder {
 public:
  explicit BufferBuilder(BufferLayout& out) : out_(out) {}

  /// Places param `k` of the job at [start, start + numel) in bucket `bucket`.
  void place(const BufferJob& job, std::size_t k, Wide start, std::int64_t bucket);
  void add_bucket(Wide start, Wide end, Wide numel_unpadded);
  /// Takes the buckets and params another builder made for the same buffer.
  void take(BufferLayout&& from, Wide max_offset);
  BufferLayout& layout() { return out_; }
  /// False when some offset does not fit in 64 bits.
  bool fits() const { return max_offset_ <= kMaxOffset; }
  Wide max_offset() const { return max_offset_; }

 private:
  static constexpr Wide kMaxOffset = INT64_MAX;
  BufferLayout& out_;
  Wide max_offset_ = 0;
};

void lay_out_unpadded(const BufferJob& job, BufferBuilder& out);
void lay_out_sequential_dp(const BufferJob& job, BufferBuilder& out);
/// Newton-Schulz cost estimate of section 4: big * small^2 for matrices (dim 0 scaled by
/// the GTP rematerialisation factor), numel otherwise; nullopt beyond 127 bits.
std::optional<Wide> newton_schulz_cost(const Param& param);

/// Fails only when a Newton-Schulz cost does not fit in 127 bits.
Result<void> lay_out_layerwise(const BufferJob& job, BufferBuilder& out);
/// The `balanced` packer: the same promises, less padding (layerwise_balanced.cpp).
Result<void> lay_out_layerwise_balanced(const BufferJob& job, BufferBuilder& out);

}  // namespace paramlayout::strategies
