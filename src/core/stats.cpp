#include "paramlayout/stats.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "paramlayout/costs.hpp"

namespace paramlayout {
namespace {

/// The Newton-Schulz cost of each of `buffer`'s params, by slot: 0 where it needs more
/// than 127 bits, the param's numel where the manifest does not name it.
std::vector<Cost> slot_costs(const BufferLayout& buffer,
                             const std::unordered_map<std::string_view, const Param*>& by_name) {
  std::vector<Cost> costs;
  costs.reserve(buffer.params.size());
  for (const ParamSlot& p : buffer.params) {
    const auto it = by_name.find(p.name);
    costs.push_back(it == by_name.end() ? Cost{p.numel()}
                                        : newton_schulz_cost(*it->second).value_or(0));
  }
  return costs;
}

double percent(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

double LayoutStats::padding_percent() const { return percent(padding, param_elements); }
double LayoutStats::floor_percent() const { return percent(floor_padding, param_elements); }

LayoutStats layout_stats(const Layout& layout, const Manifest& manifest) {
  std::unordered_map<std::string_view, const Param*> by_name;
  for (const Param& p : manifest.params) by_name.emplace(p.name, &p);

  LayoutStats stats;
  std::map<std::int64_t, std::vector<double>> cost_by_shards;  // shard count -> per-rank cost
  std::map<std::int64_t, double> largest_by_shards;
  for (const BufferLayout& b : layout.buffers) {
    BufferStats& s = stats.buffers.emplace_back();
    s.param_elements = b.param_numel();
    s.padding = b.numel - s.param_elements;
    s.floor = b.numel;
    const std::int64_t shards = b.num_shards.value_or(1);
    if (b.strategy == Strategy::layerwise) {
      stats.has_layerwise = true;
      std::int64_t largest = 0;
      for (const ParamSlot& p : b.params) largest = std::max(largest, p.numel());
      const std::vector<Cost> costs = slot_costs(b, by_name);
      for (const Cost cost : costs) {
        s.largest_cost = std::max(s.largest_cost, static_cast<double>(cost));
      }
      for (const Cost cost : rank_costs(b, costs)) s.rank_cost.push_back(static_cast<double>(cost));
      s.floor = std::max(s.param_elements, shards * largest);
      std::vector<double>& total = cost_by_shards[shards];
      total.resize(static_cast<std::size_t>(shards), 0.0);
      for (std::size_t r = 0; r < total.size(); ++r) total[r] += s.rank_cost[r];
      largest_by_shards[shards] = std::max(largest_by_shards[shards], s.largest_cost);
    }
    const double owned = b.strategy == Strategy::unpadded
                             ? static_cast<double>(b.numel)
                             : static_cast<double>(b.numel) / static_cast<double>(shards);
    s.optimizer_bytes_per_rank = owned * (b.key.layerwise ? 8.0 : 12.0);

    stats.param_elements += s.param_elements;
    stats.padding += s.padding;
    stats.floor_padding += s.floor - s.param_elements;
    stats.param_bytes += static_cast<double>(b.numel) * dtype_bytes(b.key.param_dtype);
    stats.grad_bytes += static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype);
    stats.optimizer_bytes += s.optimizer_bytes_per_rank;
  }
  for (const auto& [shards, costs] : cost_by_shards) {
    const double mean = std::accumulate(costs.begin(), costs.end(), 0.0) /
                        static_cast<double>(costs.size());
    if (mean <= 0) continue;
    const double max = *std::max_element(costs.begin(), costs.end());
    stats.cost_imbalance = std::max(stats.cost_imbalance, max / mean);
    stats.cost_imbalance_bound =
        std::max(stats.cost_imbalance_bound, std::max(mean, largest_by_shards[shards]) / mean);
  }
  return stats;
}

}  // namespace paramlayout
