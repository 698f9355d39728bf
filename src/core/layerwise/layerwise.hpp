// The layerwise strategy (Megatron-LM's layer-wise distributed optimizer, for Muon): every
// param whole in one rank's shard of its bucket. Buffers are packed Megatron-LM's way
// (megatron.hpp) or, with the balanced packer, the balanced way (balanced.hpp) where that
// is never worse. This is what plan() sees of the module.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "paramlayout/costs.hpp"
#include "strategies/buffer_builder.hpp"

namespace paramlayout::layerwise {

using strategies::BufferJob;
struct Packing;

/// Lays out the layerwise buffers of one shard count, which share their ranks, one after
/// another. With the balanced packer, a buffer's balanced packing is kept only where it pads
/// no more than Megatron-LM's and, counting the buffers before, loads no rank more than
/// Megatron-LM's packing of all of them would: first the tighter search, then plain best-fit
/// (whose ranks can come out lighter); else Megatron-LM's packing. A rank's Newton-Schulz
/// cost is its sum over these buffers, as `stats` weighs it (rank_costs).
class Chooser {
 public:
  explicit Chooser(Packer packer) : packer_(packer) {}

  /// Lays out the next buffer, `job`'s, into `out` (its key, strategy and shard count set),
  /// which is buffer `index` of the layout. Fails where a Newton-Schulz cost, or the sum of
  /// a shard's, does not fit in 127 bits, or an offset in 64 bits.
  Result<void> lay_out(const BufferJob& job, std::size_t index, BufferLayout& out);

  /// Once every buffer is laid out: where the layouts kept still leave some rank heavier
  /// than Megatron-LM's packing of every buffer would (a buffer kept Megatron-LM's way can
  /// load the rank another's balanced packing made heavy), replaces them in `buffers` by
  /// Megatron-LM's, so the layout never loses on either figure.
  void settle(std::vector<BufferLayout>& buffers);

 private:
  /// The balanced packing of `job`'s buffer where it is no worse than `megatron`, its
  /// Megatron-LM packing; else nothing.
  std::optional<Packing> pack_balanced(const BufferJob& job, const std::vector<Cost>& cost,
                                       const Packing& megatron) const;

  Packer packer_;
  std::vector<Cost> kept_;      ///< each rank's cost under the layouts kept
  std::vector<Cost> megatron_;  ///< had every buffer been packed Megatron-LM's way
  /// Megatron-LM's layout of each buffer where the balanced one was kept, by index.
  std::vector<std::pair<std::size_t, BufferLayout>> megatron_layouts_;
};

}  // namespace paramlayout::layerwise
