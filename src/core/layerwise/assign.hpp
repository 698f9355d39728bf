// Balancing the optimizer's work: which bin of a bucket each param goes to at a capacity,
// and which shard (rank) each bin becomes.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "layerwise/bins.hpp"
#include "paramlayout/costs.hpp"

namespace paramlayout::layerwise {

/// Positions [from, to) (spans `span`, costs `cost`, by position) into dp bins of
/// `capacity` by Newton-Schulz cost: the costliest first, each to the cheapest bin it fits
/// in (the first on ties). Nothing when an item finds no room, or beyond 64 shards.
std::optional<BinOf> pack_by_cost(std::span<const Size> span, std::span<const Cost> cost,
                                  std::size_t from, std::size_t to, Shards shards, Size capacity);

/// Gives each bucket's bins (`bin_cost[b][bin]`: the cost each holds) to shards: buckets with
/// the costliest bin first, each's bins costliest first onto the least-loaded shards; then,
/// while the heaviest shard is above `target`, the swap of two bins of one bucket that
/// lightens it most (at most 256). `load`: each shard's cost before (from the buffers
/// planned before, whose ranks these share), and after. The shard of each bucket's bins.
std::vector<std::vector<std::int64_t>> assign_bins(const std::vector<std::vector<Cost>>& bin_cost,
                                                   std::vector<Cost>& load, Cost target);

}  // namespace paramlayout::layerwise
