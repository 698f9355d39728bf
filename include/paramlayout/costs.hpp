// Newton-Schulz costs: the layer-wise optimizer's work on a param, estimated as Megatron-LM's
// layer-wise optimizer weighs it, and what each rank of a layerwise buffer carries.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// Costs and their sums are 128 bits wide, so they never wrap unseen.
__extension__ typedef __int128 Cost;

/// The largest Cost, 2^127 - 1: where sums of costs saturate.
inline constexpr Cost kMaxCost = ~(Cost{1} << 127);

/// a + b, or kMaxCost where that would not fit (for costs, which are never negative).
inline Cost saturating_add(Cost a, Cost b) {
  Cost sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? kMaxCost : sum;
}

/// A param's Newton-Schulz cost: big * small^2 for a matrix whose dims are big and small
/// (dim 0 scaled by the GTP rematerialisation factor first), numel for anything else;
/// nullopt where it needs more than 127 bits.
std::optional<Cost> newton_schulz_cost(const Param& param);

/// Each rank's Newton-Schulz cost in a layerwise `buffer`: `slot_cost[i]` is the cost of
/// `buffer.params[i]`, carried by the rank whose shard of its bucket holds the param's first
/// element. Sums saturate at kMaxCost; a param outside every shard counts on no rank.
std::vector<Cost> rank_costs(const BufferLayout& buffer, std::span<const Cost> slot_cost);

}  // namespace paramlayout
