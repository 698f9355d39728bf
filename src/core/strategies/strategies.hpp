// The per-buffer layout strategies of docs/strategies.md (Unpadded, Sequential-dp and
// Layerwise packing, and the balanced packer).
#pragma once

#include <memory>

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
  /// Fills `out`, with room for `params` param slots.
  explicit BufferBuilder(BufferLayout& out, std::size_t params = 0) : out_(out) {
    out_.params.reserve(params);
  }

  /// Places param `k` of the job at [start, start + numel) in bucket `bucket`.
  void place(const BufferJob& job, std::size_t k, Wide start, std::int64_t bucket);
  void add_bucket(Wide start, Wide end, Wide numel_unpadded);
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
/// Newton-Schulz cost estimate of docs/strategies.md, Layerwise packing: big * small^2 for
/// matrices (dim 0 scaled by the GTP rematerialisation factor), numel otherwise; nullopt
/// beyond 127 bits.
std::optional<Wide> newton_schulz_cost(const Param& param);

/// Every param's Newton-Schulz cost, by position in the job; an error naming the param whose
/// cost does not fit in 127 bits.
Result<std::vector<Wide>> newton_schulz_costs(const BufferJob& job);

/// The open bucket of a layerwise buffer, closed as dp shards of one size; the next bucket
/// starts where it ends.
class LayerwiseBuckets {
 public:
  LayerwiseBuckets(BufferBuilder& out, std::int64_t shards, std::int64_t shard_divisor)
      : out_(out), shards_(shards), shard_divisor_(shard_divisor) {}
  Wide start() const { return start_; }
  std::int64_t id() const { return id_; }
  void close(Wide shard_size, Wide numel_unpadded) {
    const Wide end = start_ + shards_ * shard_size;
    out_.add_bucket(start_, end, numel_unpadded);
    start_ = end;
    ++id_;
  }
  /// Param `k` (a shared embedding) alone in shard 0 of a bucket of its own.
  void shared_embedding(const BufferJob& job, std::size_t k) {
    const std::int64_t numel = job.param(k).numel;
    out_.place(job, k, start_, id_);
    close(pad_to(Wide{numel}, Wide{shard_divisor_}), numel);
  }

 private:
  BufferBuilder& out_;
  std::int64_t shards_;
  std::int64_t shard_divisor_;
  Wide start_ = 0;
  std::int64_t id_ = 0;
};

/// The largest Wide, 2^127 - 1: where sums of costs saturate.
inline constexpr Wide kWideMax = ~(Wide{1} << 127);

/// a + b for costs, or kWideMax where that would not fit.
inline Wide saturating_add(Wide a, Wide b) {
  Wide sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? kWideMax : sum;
}

/// Fails only when a Newton-Schulz cost, or the sum of a shard's, does not fit in 127 bits.
Result<void> lay_out_layerwise(const BufferJob& job, BufferBuilder& out);

/// Megatron-LM's packing of a layerwise buffer, apart from laying it out: `balanced` weighs
/// it first and lays it out only where it keeps it.
class MegatronPacking {
 public:
  /// Packs the buffer, given every param's Newton-Schulz cost (newton_schulz_costs); fails
  /// only when a shard's costs add up to more than 127 bits.
  static Result<MegatronPacking> pack(const BufferJob& job, std::vector<Wide> cost);
  MegatronPacking(MegatronPacking&&) noexcept;
  MegatronPacking& operator=(MegatronPacking&&) noexcept;
  ~MegatronPacking();

  /// The buffer's size in elements.
  Wide size() const;
  /// Each rank's Newton-Schulz cost (shared embeddings on rank 0; saturated at 2^127 - 1).
  std::vector<Wide> rank_costs() const;
  /// Lays the buffer out as packed.
  void write(BufferBuilder& out);

 private:
  class Packer;
  explicit MegatronPacking(std::unique_ptr<Packer> packer);
  std::unique_ptr<Packer> packer_;
};

/// Each rank's Newton-Schulz cost over the layerwise buffers of one shard count planned so
/// far, as `layout_stats` adds them up: `balanced` answers for the layout's heaviest rank.
struct RankCosts {
  std::vector<Wide> kept;      ///< under the layouts kept
  std::vector<Wide> megatron;  ///< had every buffer been packed Megatron-LM's way
};

/// The `balanced` packer: the same promises, less padding (layerwise_balanced.cpp). `ranks`
/// holds the buffers of this shard count planned before, and takes this one.
Result<void> lay_out_layerwise_balanced(const BufferJob& job, BufferBuilder& out,
                                        RankCosts& ranks);

}  // namespace paramlayout::strategies
