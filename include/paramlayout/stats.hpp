// Quality figures of a layout: padding against its floor, Newton-Schulz cost balance across
// ranks, memory per rank (params, grads, optimizer state) with the padding counted, and what
// each rank sends per training step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// padding / (padding + params) in percent: the share of a buffer's elements that hold no
/// param, the one padding figure paramlayout reports (0 for an empty buffer).
double padding_share_percent(std::int64_t padding, std::int64_t param_elements);

/// What one buffer moves per training step, on each rank, as Megatron-LM's DDP moves it: a
/// sharded buffer reduce-scatters each grad bucket and all-gathers each param bucket over its
/// shards (distributed optimizer, layerwise); an unpadded one all-reduces each grad bucket
/// over its data-parallel ranks (plain DDP).
struct BufferTraffic {
  std::int64_t ranks = 1;  ///< the ranks each bucket's collective spans
  std::int64_t buckets = 0;
  std::int64_t smallest_bucket = 0;       ///< elements
  std::int64_t largest_bucket = 0;        ///< elements
  std::int64_t reduce_scatter_bytes = 0;  ///< the grad buckets' bytes, each rank's input
  std::int64_t all_gather_bytes = 0;      ///< the param buckets' bytes, each rank's output
  std::int64_t all_reduce_bytes = 0;      ///< the grad buckets' bytes (unpadded buffers)
  /// Bytes each rank sends (and receives) under ring algorithms: (ranks - 1) / ranks of each
  /// reduce-scatter and all-gather, 2 (ranks - 1) / ranks of each all-reduce (rounded down).
  std::int64_t sent_bytes = 0;
  /// The part of sent_bytes that carries padding (the same fraction of each collective as of
  /// its buffer), rounded down.
  std::int64_t padding_sent_bytes = 0;
};

/// What the optimizer keeps for each element of a buffer, on the rank that owns the element
/// (the distributed optimizer shards its state over the buffer's ranks), in bytes.
struct OptimizerState {
  int main_param_bytes = 4;  ///< the main (master) copy of the param, fp32
  int moment_bytes = 4;      ///< each moment, fp32
  int moments = 2;           ///< Adam: exp_avg and exp_avg_sq; Muon: the momentum

  int bytes_per_element() const { return main_param_bytes + moments * moment_bytes; }
  bool operator==(const OptimizerState&) const = default;
};

/// Megatron-LM's optimizer state for the buffer of `key`: Adam for a buffer of the
/// distributed optimizer (fp32 main params and two fp32 moments, 12 bytes per element), Muon
/// for a layerwise one (fp32 main params and one fp32 momentum, 8 bytes).
OptimizerState optimizer_state(const BufferKey& key);

/// Bytes per rank. Megatron-LM's DDP keeps whole param and grad buffers on every rank; the
/// optimizer state is sharded: each rank holds its shard's.
struct BytesPerRank {
  std::int64_t params = 0;
  std::int64_t grads = 0;
  std::int64_t optimizer = 0;

  /// params + grads + optimizer: what decides which chunk or stage is the heaviest.
  /// Saturates at the largest 64-bit figure (layout_stats refuses a layout whose total does
  /// not fit).
  std::int64_t total() const;
  /// Adds `other`; false when a figure or the total would not fit in 64 bits.
  bool add(const BytesPerRank& other);

  bool operator==(const BytesPerRank&) const = default;
};

/// The elements of `buffer` whose optimizer state one rank keeps: its shard of a sharded
/// buffer (whole shards: numel is a multiple of the shard count), all of an unpadded one.
std::int64_t optimizer_elements_per_rank(const BufferLayout& buffer);

/// The bytes of `buffer`'s param buffer on each rank: none where it is a view of the grad
/// buffer (mxfp8), its packed size where it holds nvfp4 params, else numel x the param
/// dtype's bytes; nullopt when it does not fit in 64 bits.
std::optional<std::int64_t> param_buffer_bytes(const BufferLayout& buffer);

/// The bytes of `buffer`'s param buckets, which each rank's all-gathers output per step:
/// bfloat16 elements where the param buffer is a view of the grad buffer (mxfp8), the packed
/// buckets' bytes for nvfp4, else numel x the param dtype's bytes.
std::optional<std::int64_t> param_gather_bytes(const BufferLayout& buffer);

/// What one buffer needs per rank, padding included: nullopt when a figure does not fit in
/// 64 bits.
std::optional<BytesPerRank> buffer_bytes_per_rank(const BufferLayout& buffer);

/// One buffer's figures.
struct BufferStats {
  BufferKey key;
  std::int64_t param_elements = 0;
  std::int64_t padding = 0;
  /// The fewest elements any layout under the rules needs: layerwise, max(params, shards x
  /// the largest param) (a bucket of equal shards holds its largest param whole); other
  /// strategies, the buffer as their rules fix it.
  std::int64_t floor = 0;
  /// The largest param (layerwise buffers: what sets the floor), and its elements.
  std::string_view largest_param;
  std::int64_t largest_param_elements = 0;
  /// Per-rank Newton-Schulz cost (layerwise buffers; empty otherwise).
  std::vector<double> rank_cost;
  double largest_cost = 0;
  OptimizerState optimizer;
  BytesPerRank bytes_per_rank;
  BufferTraffic traffic;

  double padding_percent() const { return padding_share_percent(padding, param_elements); }
};

/// The traffic of a whole layout per step and rank: its buffers' collectives one after the
/// other.
struct LayoutTraffic {
  std::int64_t reduce_scatter_bytes = 0;
  std::int64_t all_gather_bytes = 0;
  std::int64_t all_reduce_bytes = 0;
  std::int64_t sent_bytes = 0;
  std::int64_t padding_sent_bytes = 0;

  /// padding_sent_bytes over sent_bytes, in percent.
  double padding_percent() const;
  /// A ring-model estimate of the seconds the collectives take on links of `gbps` gigabits
  /// per second per rank: sent bytes over the bandwidth, without latency or overlap.
  double estimated_seconds(double gbps) const;
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
  /// The buffers' bytes per rank (their sum fits in 64 bits).
  BytesPerRank bytes_per_rank;
  LayoutTraffic traffic;

  /// Padding as a share of the buffers' elements, and the floor's share of the least
  /// buffers the rules allow.
  double padding_percent() const;
  double floor_percent() const;
};

/// What a layout needs, without its costs and traffic: its elements, padding and bytes per
/// rank, as layout_stats reports them (cheap enough to weigh other plans of a manifest).
struct LayoutFootprint {
  std::int64_t param_elements = 0;
  std::int64_t padding = 0;
  BytesPerRank bytes_per_rank;

  double padding_percent() const;
};

/// The footprint of a planned `layout`; nullopt when a figure does not fit in 64 bits.
std::optional<LayoutFootprint> layout_footprint(const Layout& layout);

/// Whether a layout's structure is checked before its figures are taken: always for a layout
/// read from a file; `trusted` only for one the planner has just made, when its figures alone
/// are wanted (a search's thousands of plans).
enum class LayoutStructure { check, trusted };

/// The figures of `layout`, planned from `manifest` (for the params' shapes). Fails when the
/// layout breaks a promise of check_structure (unless `trusted`), or a figure does not fit in
/// 64 bits.
Result<LayoutStats> layout_stats(const Layout& layout, const Manifest& manifest,
                                 LayoutStructure structure = LayoutStructure::check);

/// The figures as one JSON object (no newline), as `stats --json` prints them and a
/// layout's `stats` member holds them. The keys, in order: param_elements, padding,
/// floor_padding, padding_percent, floor_percent, cost_imbalance, cost_imbalance_bound,
/// bytes_per_rank {params, grads, optimizer}, traffic_per_step (formats.md); with a
/// `link_gbps` above 0, also `estimate` {link_gbps, seconds}: the ring-model time of the
/// collectives on links that fast (not part of a layout's `stats` member).
std::string stats_to_json(const LayoutStats& stats, double link_gbps = 0);

}  // namespace paramlayout
