// Quality figures of a layout: padding against its floor, Newton-Schulz cost balance across
// ranks, and memory per rank (params, grads, optimizer state) with the padding counted.
#pragma once

#include <cstdint>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// One buffer's figures.
struct BufferStats {
  std::int64_t param_elements = 0;
  std::int64_t padding = 0;
  /// The fewest elements any layout under the rules needs: layerwise, max(params, shards x
  /// the largest param) (a bucket of equal shards holds its largest param whole); other
  /// strategies, the buffer as their rules fix it.
  std::int64_t floor = 0;
  /// Per-rank Newton-Schulz cost (layerwise buffers; empty otherwise).
  std::vector<double> rank_cost;
  double largest_cost = 0;
  std::int64_t optimizer_bytes_per_rank = 0;
};

struct LayoutStats {
  std::vector<BufferStats> buffers;
  std::int64_t param_elements = 0;
  std::int64_t padding = 0;
  std::int64_t floor_padding = 0;  ///< sum of floor - param elements
  /// Newton-Schulz cost over ranks (the layerwise buffers of each shard count added up):
  /// max / mean, and the lower bound max(mean, largest single cost) / mean.
  bool has_layerwise = false;  ///< the cost figures below are about layerwise buffers
  double cost_imbalance = 1;
  double cost_imbalance_bound = 1;
  /// Bytes per rank. Megatron-LM's DDP keeps whole param and grad buffers on every rank;
  /// the optimizer state is sharded: fp32 main params plus two Adam moments (12 bytes per
  /// element) for non-Muon params, fp32 main params plus one momentum (8 bytes) for Muon.
  std::int64_t param_bytes = 0;
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;

  double padding_percent() const;
  double floor_percent() const;
};

/// The figures of `layout`, planned from `manifest` (for the params' shapes). Fails when the
/// layout breaks a promise of check_structure, or a figure does not fit in 64 bits.
Result<LayoutStats> layout_stats(const Layout& layout, const Manifest& manifest);

/// The figures as one JSON object (no newline), as `stats --json` prints them and a
/// layout's `stats` member holds them.
std::string stats_to_json(const LayoutStats& stats);

}  // namespace paramlayout
