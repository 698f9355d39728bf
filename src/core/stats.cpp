#include "paramlayout/stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "paramlayout/check.hpp"
#include "paramlayout/costs.hpp"
#include "paramlayout/text.hpp"

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

/// `total` += `part`; false when the sum does not fit in 64 bits.
bool add_to(std::int64_t& total, std::optional<std::int64_t> part) {
  const std::optional<std::int64_t> sum = part ? checked_add(total, *part) : std::nullopt;
  if (sum) total = *sum;
  return sum.has_value();
}

}  // namespace

double LayoutStats::padding_percent() const { return percent(padding, param_elements); }
double LayoutStats::floor_percent() const { return percent(floor_padding, param_elements); }

Result<LayoutStats> layout_stats(const Layout& layout, const Manifest& manifest) {
  if (Result<void> valid = validate_structure(layout); !valid) return valid.error();
  const auto too_large = [&](std::string_view what) {
    return Error{fmt::format("{}: {} more than {}, the most a 64-bit figure holds: too large",
                             layout.source.empty() ? manifest.source : layout.source, what,
                             group_digits(std::numeric_limits<std::int64_t>::max()))};
  };
  std::unordered_map<std::string_view, const Param*> by_name;
  for (const Param& p : manifest.params) by_name.emplace(p.name, &p);

  LayoutStats stats;
  std::map<std::int64_t, std::vector<double>> cost_by_shards;  // shard count -> per-rank cost
  std::map<std::int64_t, double> largest_by_shards;
  for (const BufferLayout& b : layout.buffers) {
    BufferStats& s = stats.buffers.emplace_back();
    s.param_elements = b.param_numel().value_or(0);  // fits: its params are disjoint
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
      // Fits: each layerwise param lies whole in one shard of a bucket.
      s.floor = std::max(s.param_elements, checked_mul(shards, largest).value_or(b.numel));
      std::vector<double>& total = cost_by_shards[shards];
      total.resize(static_cast<std::size_t>(shards), 0.0);
      for (std::size_t r = 0; r < total.size(); ++r) total[r] += s.rank_cost[r];
      largest_by_shards[shards] = std::max(largest_by_shards[shards], s.largest_cost);
    }
    // Sharded buffers hold whole shards: numel is a multiple of the shard count.
    const std::int64_t owned = b.strategy == Strategy::unpadded ? b.numel : b.numel / shards;
    const std::optional<std::int64_t> optimizer_bytes =
        checked_mul(owned, b.key.layerwise ? 8 : 12);
    if (!optimizer_bytes) return too_large("a buffer's optimizer state per rank takes");
    s.optimizer_bytes_per_rank = *optimizer_bytes;

    if (!add_to(stats.param_elements, s.param_elements) || !add_to(stats.padding, s.padding) ||
        !add_to(stats.floor_padding, s.floor - s.param_elements) ||
        !checked_add(stats.param_elements, stats.padding)) {
      return too_large("the buffers' elements add up to");
    }
    if (!add_to(stats.param_bytes, checked_mul(b.numel, dtype_bytes(b.key.param_dtype))) ||
        !add_to(stats.grad_bytes, checked_mul(b.numel, dtype_bytes(b.key.grad_dtype))) ||
        !add_to(stats.optimizer_bytes, s.optimizer_bytes_per_rank) ||
        !checked_add(stats.param_bytes, stats.grad_bytes) ||
        !checked_add(stats.param_bytes + stats.grad_bytes, stats.optimizer_bytes)) {
      return too_large("the bytes per rank of params, grads and optimizer state add up to");
    }
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
