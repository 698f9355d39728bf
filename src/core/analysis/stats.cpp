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

__extension__ using Wide = __int128;

double percent(Wide part, Wide whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

/// `total` += `part`; false when the sum does not fit in 64 bits.
bool add_to(std::int64_t& total, std::optional<std::int64_t> part) {
  const std::optional<std::int64_t> sum = part ? checked_add(total, *part) : std::nullopt;
  if (sum) total = *sum;
  return sum.has_value();
}

/// What `b` moves per step on each rank (stats.hpp, BufferTraffic); nullopt where a figure
/// does not fit in 64 bits.
std::optional<BufferTraffic> buffer_traffic(const BufferLayout& b, const PlanOptions& options,
                                            std::int64_t padding) {
  BufferTraffic t;
  const bool sharded = b.strategy != Strategy::unpadded;
  t.ranks =
      sharded ? b.num_shards.value_or(1) : (b.key.expert_parallel ? options.expert_dp : options.dp);
  t.buckets = static_cast<std::int64_t>(b.buckets.size());
  for (std::size_t j = 0; j < b.buckets.size(); ++j) {
    const std::int64_t size = b.buckets[j].size();
    t.smallest_bucket = j == 0 ? size : std::min(t.smallest_bucket, size);
    t.largest_bucket = std::max(t.largest_bucket, size);
  }
  const Wide grad = Wide{b.numel} * dtype_bytes(b.key.grad_dtype);
  const std::optional<std::int64_t> gathered = param_gather_bytes(b);
  if (!gathered) return std::nullopt;
  const Wide param = *gathered;
  // Each collective sends (ranks - 1) / ranks of its bytes per rank, an all-reduce twice
  // that; padding is the same share of every bucket's bytes as of the buffer's.
  const Wide moved = sharded ? grad + param : 2 * grad;
  const Wide sent = moved * (t.ranks - 1) / t.ranks;
  constexpr Wide kMax = std::numeric_limits<std::int64_t>::max();
  if (grad > kMax || param > kMax || sent > kMax) return std::nullopt;
  const Wide padding_sent = b.numel == 0 ? 0 : sent * padding / b.numel;
  (sharded ? t.reduce_scatter_bytes : t.all_reduce_bytes) = static_cast<std::int64_t>(grad);
  if (sharded) t.all_gather_bytes = static_cast<std::int64_t>(param);
  t.sent_bytes = static_cast<std::int64_t>(sent);
  t.padding_sent_bytes = static_cast<std::int64_t>(padding_sent);
  return t;
}

/// Adds one buffer's traffic to the layout's; false when a sum does not fit in 64 bits.
bool add_traffic(LayoutTraffic& total, const BufferTraffic& t) {
  return add_to(total.reduce_scatter_bytes, t.reduce_scatter_bytes) &&
         add_to(total.all_gather_bytes, t.all_gather_bytes) &&
         add_to(total.all_reduce_bytes, t.all_reduce_bytes) &&
         add_to(total.sent_bytes, t.sent_bytes) &&
         add_to(total.padding_sent_bytes, t.padding_sent_bytes);
}

}  // namespace

OptimizerState optimizer_state(const BufferKey& key) {
  OptimizerState state;
  if (key.layerwise) state.moments = 1;
  return state;
}

std::int64_t BytesPerRank::total() const {
  BytesPerRank sum;
  return sum.add(*this) ? sum.params + sum.grads + sum.optimizer
                        : std::numeric_limits<std::int64_t>::max();
}

bool BytesPerRank::add(const BytesPerRank& other) {
  BytesPerRank sum = *this;
  if (!add_to(sum.params, other.params) || !add_to(sum.grads, other.grads) ||
      !add_to(sum.optimizer, other.optimizer) || !checked_add(sum.params, sum.grads) ||
      !checked_add(sum.params + sum.grads, sum.optimizer)) {
    return false;
  }
  *this = sum;
  return true;
}

std::int64_t optimizer_elements_per_rank(const BufferLayout& b) {
  return b.strategy == Strategy::unpadded ? b.numel : b.numel / b.num_shards.value_or(1);
}

std::optional<std::int64_t> param_buffer_bytes(const BufferLayout& b) {
  if (b.param_buffer.in_grad_buffer) return 0;
  return checked_mul(b.param_buffer.packed ? b.param_buffer.numel : b.numel,
                     dtype_bytes(b.key.param_dtype));
}

std::optional<std::int64_t> param_gather_bytes(const BufferLayout& b) {
  // param_and_grad_buffer.py:508-524 all-gathers each bucket's param_data: a bfloat16 view
  // of the grad buffer for mxfp8 (1170-1177), the packed buckets for nvfp4 (1573-1581).
  return checked_mul(b.param_buffer.packed ? b.param_buffer.numel : b.numel,
                     b.param_buffer.in_grad_buffer ? dtype_bytes(DType::bfloat16)
                                                   : dtype_bytes(b.key.param_dtype));
}

std::optional<BytesPerRank> buffer_bytes_per_rank(const BufferLayout& b) {
  const std::int64_t owned = optimizer_elements_per_rank(b);
  const std::optional<std::int64_t> params = param_buffer_bytes(b);
  const std::optional<std::int64_t> grads = checked_mul(b.numel, dtype_bytes(b.key.grad_dtype));
  const std::optional<std::int64_t> optimizer =
      checked_mul(owned, optimizer_state(b.key).bytes_per_element());
  BytesPerRank bytes;
  if (!params || !grads || !optimizer || !bytes.add({*params, *grads, *optimizer})) {
    return std::nullopt;
  }
  return bytes;
}

double LayoutFootprint::padding_percent() const {
  return padding_share_percent(padding, param_elements);
}

std::optional<LayoutFootprint> layout_footprint(const Layout& layout) {
  LayoutFootprint f;
  for (const BufferLayout& b : layout.buffers) {
    const std::optional<std::int64_t> params = b.param_numel();
    const std::optional<BytesPerRank> bytes = buffer_bytes_per_rank(b);
    if (!params || !bytes || !add_to(f.param_elements, *params) ||
        !add_to(f.padding, b.numel - *params) || !f.bytes_per_rank.add(*bytes)) {
      return std::nullopt;
    }
  }
  return f;
}

double padding_share_percent(std::int64_t padding, std::int64_t param_elements) {
  return percent(padding, Wide{padding} + param_elements);
}

double LayoutStats::padding_percent() const {
  return padding_share_percent(padding, param_elements);
}
double LayoutStats::floor_percent() const {
  return padding_share_percent(floor_padding, param_elements);
}

double LayoutTraffic::padding_percent() const { return percent(padding_sent_bytes, sent_bytes); }

double LayoutTraffic::estimated_seconds(double gbps) const {
  return gbps > 0 ? static_cast<double>(sent_bytes) * 8 / (gbps * 1e9) : 0.0;
}

Result<LayoutStats> layout_stats(const Layout& layout, const Manifest& manifest,
                                 LayoutStructure structure) {
  if (structure == LayoutStructure::check) {
    if (Result<void> valid = validate_structure(layout); !valid) return valid.error();
  }
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
    s.key = b.key;
    s.param_elements = b.param_numel().value_or(0);  // fits: its params are disjoint
    s.padding = b.numel - s.param_elements;
    s.floor = b.numel;
    const std::int64_t shards = b.num_shards.value_or(1);
    if (b.strategy == Strategy::layerwise) {
      stats.has_layerwise = true;
      std::int64_t largest = 0;
      for (const ParamSlot& p : b.params) {
        if (p.numel() <= largest) continue;
        largest = p.numel();
        s.largest_param = p.name;
      }
      s.largest_param_elements = largest;
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
    s.optimizer = optimizer_state(b.key);
    const std::optional<BytesPerRank> bytes = buffer_bytes_per_rank(b);
    if (!bytes) return too_large("a buffer's params, grads and optimizer state per rank take");
    s.bytes_per_rank = *bytes;

    if (!add_to(stats.param_elements, s.param_elements) || !add_to(stats.padding, s.padding) ||
        !add_to(stats.floor_padding, s.floor - s.param_elements) ||
        !checked_add(stats.param_elements, stats.padding)) {
      return too_large("the buffers' elements add up to");
    }
    const std::optional<BufferTraffic> traffic = buffer_traffic(b, layout.options, s.padding);
    if (!traffic || !add_traffic(stats.traffic, *traffic)) {
      return too_large("the bytes each rank sends per step add up to");
    }
    s.traffic = *traffic;
    if (!stats.bytes_per_rank.add(s.bytes_per_rank)) {
      return too_large("the bytes per rank of params, grads and optimizer state add up to");
    }
  }
  for (const auto& [shards, costs] : cost_by_shards) {
    const double mean =
        std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
    if (mean <= 0) continue;
    const double max = *std::max_element(costs.begin(), costs.end());
    stats.cost_imbalance = std::max(stats.cost_imbalance, max / mean);
    stats.cost_imbalance_bound =
        std::max(stats.cost_imbalance_bound, std::max(mean, largest_by_shards[shards]) / mean);
  }
  return stats;
}

}  // namespace paramlayout
