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
  Result<LayoutStats> stats = layout_stats(*layout, manifest);
  if (!stats) return std::nullopt;
  return Alternative{std::move(text), options, std::move(*stats)};
}

}  // namespace

std::int64_t total_bytes_per_rank(const LayoutStats& s) {
  const std::optional<std::int64_t> sum = checked_add(s.param_bytes, s.grad_bytes);
  const std::optional<std::int64_t> total = sum ? checked_add(*sum, s.optimizer_bytes) : sum;
  return total.value_or(std::numeric_limits<std::int64_t>::max());
}

std::optional<PaddingAdvice> padding_advice(const Manifest& manifest, const Layout& layout,
                                            const LayoutStats& stats) {
  const PlanOptions& o = layout.options;
  if (o.strategy != Strategy::layerwise || stats.padding_percent() < kFarPadding) {
    return std::nullopt;
  }
  PaddingAdvice advice;
  const std::int64_t bytes = total_bytes_per_rank(stats);
  // Layerwise with the other packer, and with one bucket per buffer: each bucket's shards
  // must each hold its largest matrix, so every bucket more can force more padding. The other
  // packer first: it keeps the buckets, whose reduction overlaps the backward pass.
  const Packer other = o.packer == Packer::megatron ? Packer::balanced : Packer::megatron;
  std::vector<std::pair<PlanOptions, std::string>> tries;
  for (const auto& [packer, one_bucket] :
       {std::pair{other, false}, std::pair{o.packer, true}, std::pair{other, true}}) {
    PlanOptions t = o;
    t.packer = packer;
    if (one_bucket) t.bucket_size.reset();
    if (t == o) continue;
    std::vector<std::string> changes;
    if (packer != o.packer) changes.push_back(fmt::format("--packer {}", to_string(packer)));
    if (t.bucket_size != o.bucket_size) changes.emplace_back("--bucket-size none");
    tries.emplace_back(t, fmt::format("{}", fmt::join(changes, " ")));
  }
  for (auto& [options, text] : tries) {
    std::optional<Alternative> a = alternative(manifest, options, std::move(text));
    if (!a || total_bytes_per_rank(a->stats) >= bytes) continue;
    if (!advice.better_layerwise ||
        total_bytes_per_rank(a->stats) < total_bytes_per_rank(advice.better_layerwise->stats)) {
      advice.better_layerwise = std::move(a);
    }
  }
  PlanOptions sequential = o;
  sequential.strategy = Strategy::sequential_dp;
  sequential.packer = Packer::megatron;
  advice.sequential_dp = alternative(manifest, sequential, "--strategy sequential-dp");

  std::int64_t best = bytes;
  for (const std::optional<Alternative>& a : {advice.better_layerwise, advice.sequential_dp}) {
    if (a) best = std::min(best, total_bytes_per_rank(a->stats));
  }
  if (static_cast<double>(bytes) < kFarMemory * static_cast<double>(best)) return std::nullopt;
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
