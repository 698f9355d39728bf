#include "paramlayout/alternatives.hpp"

#include <fmt/format.h>

#include <limits>

#include "paramlayout/plan.hpp"

namespace paramlayout {
namespace {

constexpr double kFarPadding = 25;   ///< percent of the buffers
constexpr double kFarMemory = 1.25;  ///< times the best alternative's bytes per rank

std::optional<Alternative> alternative(const Manifest& manifest, PlanOptions options,
                                       std::string text) {
  Result<Layout> layout = plan(manifest, options);
  if (!layout) return std::nullopt;
  const std::optional<LayoutFootprint> footprint = layout_footprint(*layout);
  if (!footprint) return std::nullopt;
  return Alternative{std::move(text), options, *footprint};
}

/// The fewest bytes per rank any layerwise plan of the manifest behind `layout` could need,
/// whatever its packer and buckets: each layerwise buffer at its floor (stats.hpp,
/// BufferStats::floor), each other buffer at its params.
std::int64_t layerwise_floor_bytes(const Layout& layout, const LayoutStats& stats) {
  BytesPerRank floor;
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    BufferLayout b;
    b.key = layout.buffers[i].key;
    b.strategy = layout.buffers[i].strategy;
    b.num_shards = layout.buffers[i].num_shards;
    b.param_buffer.in_grad_buffer = layout.buffers[i].param_buffer.in_grad_buffer;
    const BufferStats& s = stats.buffers[i];
    b.numel = b.key.layerwise ? s.floor : s.param_elements;
    const std::optional<BytesPerRank> bytes = buffer_bytes_per_rank(b);
    if (!bytes || !floor.add(*bytes)) return std::numeric_limits<std::int64_t>::max();
  }
  return floor.total();
}

bool far_above(std::int64_t bytes, std::int64_t other) {
  return static_cast<double>(bytes) >= kFarMemory * static_cast<double>(other);
}

}  // namespace

std::optional<PaddingAdvice> padding_advice(const Manifest& manifest, const Layout& layout,
                                            const LayoutStats& stats) {
  const PlanOptions& o = layout.options;
  if (o.strategy != Strategy::layerwise || stats.padding_percent() < kFarPadding) {
    return std::nullopt;
  }
  PaddingAdvice advice;
  const std::int64_t bytes = stats.bytes_per_rank.total();
  PlanOptions sequential = o;
  sequential.strategy = Strategy::sequential_dp;
  sequential.packer = Packer::megatron;
  advice.sequential_dp = alternative(manifest, sequential, "--strategy sequential-dp");
  const std::int64_t floor = layerwise_floor_bytes(layout, stats);
  // No layerwise plan needs less than the floor: when neither it nor sequential-dp is far
  // below this plan, no alternative is.
  const bool sequential_far_below =
      advice.sequential_dp &&
      far_above(bytes, advice.sequential_dp->footprint.bytes_per_rank.total());
  if (!far_above(bytes, floor) && !sequential_far_below) {
    return std::nullopt;
  }
  // Layerwise with the other packer, and with one bucket per buffer: each bucket's shards
  // must each hold its largest matrix, so every bucket more can force more padding. The other
  // packer first: it keeps the buckets, whose reduction overlaps the backward pass.
  const Packer other = o.packer == Packer::megatron ? Packer::balanced : Packer::megatron;
  for (const auto& [packer, one_bucket] :
       {std::pair{other, false}, std::pair{o.packer, true}, std::pair{other, true}}) {
    PlanOptions t = o;
    t.packer = packer;
    if (one_bucket) t.bucket_size.reset();
    if (t == o) continue;
    const std::int64_t best =
        advice.better_layerwise ? advice.better_layerwise->footprint.bytes_per_rank.total() : bytes;
    if (floor >= best) break;  // no layerwise plan can beat the best so far
    std::vector<std::string> changes;
    if (packer != o.packer) changes.push_back(fmt::format("--packer {}", to_string(packer)));
    if (t.bucket_size != o.bucket_size) changes.emplace_back("--bucket-size none");
    std::optional<Alternative> a =
        alternative(manifest, t, fmt::format("{}", fmt::join(changes, " ")));
    if (a && a->footprint.bytes_per_rank.total() < best) advice.better_layerwise = std::move(a);
  }

  std::int64_t best = bytes;
  for (const std::optional<Alternative>& a : {advice.better_layerwise, advice.sequential_dp}) {
    if (a) best = std::min(best, a->footprint.bytes_per_rank.total());
  }
  if (!far_above(bytes, best)) return std::nullopt;
  // The floor is most of the padding: the largest matrix of a layerwise buffer sets it.
  if (stats.floor_percent() >= stats.padding_percent() / 2) {
    for (const BufferStats& b : stats.buffers) {
      if (!b.key.layerwise || b.largest_param_elements <= advice.largest_param_elements) continue;
      advice.largest_param = std::string(b.largest_param);
      advice.largest_param_elements = b.largest_param_elements;
      advice.shards = b.traffic.ranks;
      advice.shards_without_forced_padding = b.param_elements / b.largest_param_elements;
    }
  }
  return advice;
}

}  // namespace paramlayout
