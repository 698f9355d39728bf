#include "layerwise/costs.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace paramlayout {

std::optional<Cost> newton_schulz_cost(const Param& param) {
  if (param.shape.size() != 2) return Cost{param.numel};
  Cost rows = param.shape[0];
  const Cost cols = param.shape[1];
  if (param.gtp_remat_size > 1 && __builtin_mul_overflow(rows, Cost{param.gtp_remat_size}, &rows)) {
    return std::nullopt;
  }
  const Cost big = std::max(rows, cols);
  const Cost small = std::min(rows, cols);
  Cost cost = 0;
  if (__builtin_mul_overflow(big, small, &cost) || __builtin_mul_overflow(cost, small, &cost)) {
    return std::nullopt;
  }
  return cost;
}

std::vector<Cost> rank_costs(const BufferLayout& buffer, std::span<const Cost> slot_cost) {
  const std::int64_t shards = buffer.num_shards.value_or(1);
  std::vector<Cost> costs(static_cast<std::size_t>(std::max<std::int64_t>(shards, 0)), 0);
  for (std::size_t i = 0; i < buffer.params.size() && i < slot_cost.size(); ++i) {
    const ParamSlot& p = buffer.params[i];
    if (p.bucket < 0 || static_cast<std::size_t>(p.bucket) >= buffer.buckets.size()) continue;
    const BucketRange& bucket = buffer.buckets[static_cast<std::size_t>(p.bucket)];
    const std::int64_t shard_size = shards > 0 ? bucket.size() / shards : 0;
    if (shard_size <= 0 || p.start < bucket.start) continue;
    const std::int64_t rank = (p.start - bucket.start) / shard_size;
    if (rank >= shards) continue;
    Cost& cost = costs[static_cast<std::size_t>(rank)];
    cost = saturating_add(cost, slot_cost[i]);
  }
  return costs;
}

namespace layerwise {

Result<std::vector<Cost>> newton_schulz_costs(const BufferJob& job) {
  std::vector<Cost> costs(job.group.params.size());
  for (std::size_t k = 0; k < costs.size(); ++k) {
    const std::optional<Cost> cost = newton_schulz_cost(job.param(k));
    if (!cost) {
      return Error{
          fmt::format("{}: param \"{}\": its Newton-Schulz cost (shape and "
                      "gtp_remat_size) exceeds 127 bits",
                      job.manifest.source, job.param(k).name)};
    }
    costs[k] = *cost;
  }
  return costs;
}

Cost heaviest(const std::vector<Cost>& costs) {
  return costs.empty() ? 0 : *std::max_element(costs.begin(), costs.end());
}

void add_rank_costs(std::vector<Cost>& total, const std::vector<Cost>& costs) {
  if (total.size() < costs.size()) total.resize(costs.size(), 0);
  for (std::size_t r = 0; r < costs.size(); ++r) total[r] = saturating_add(total[r], costs[r]);
}

}  // namespace layerwise
}  // namespace paramlayout
