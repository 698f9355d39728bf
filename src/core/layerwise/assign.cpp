#include "layerwise/assign.hpp"

#include <algorithm>
#include <numeric>

namespace paramlayout::layerwise {
namespace {

/// At most this many swaps of bins between shards, to lighten the heaviest.
constexpr std::size_t kMaxSwaps = 256;

using BinOnShard = std::vector<std::vector<std::size_t>>;  ///< by bucket, then shard

/// 0, 1, ..., n - 1 ordered by `before`, a strict order with no ties.
template <class Before>
std::vector<std::size_t> ordered(std::size_t n, Before before) {
  std::vector<std::size_t> out(n);
  std::iota(out.begin(), out.end(), std::size_t{0});
  std::sort(out.begin(), out.end(), before);
  return out;
}

/// One bucket's bins, costliest first, onto the shards, least-loaded first.
void place(const std::vector<Cost>& cost, std::vector<Cost>& load,
           std::vector<std::size_t>& bin_on_shard) {
  const std::size_t dp = load.size();
  const auto bins = ordered(dp, [&](std::size_t x, std::size_t y) {
    return cost[x] > cost[y] || (cost[x] == cost[y] && x < y);
  });
  const auto shards = ordered(dp, [&](std::size_t x, std::size_t y) {
    return load[x] < load[y] || (load[x] == load[y] && x < y);
  });
  for (std::size_t i = 0; i < dp; ++i) {
    bin_on_shard[shards[i]] = bins[i];
    load[shards[i]] += cost[bins[i]];
  }
}

/// Swaps two bins of one bucket where that lightens the heaviest shard most, while it is
/// above `target`. `order`: the buckets in the order their swaps are weighed.
void swap_bins(const std::vector<std::vector<Cost>>& bin_cost,
               const std::vector<std::size_t>& order, std::vector<Cost>& load, Cost target,
               BinOnShard& bin_on_shard) {
  const auto on = [&](std::size_t b, std::size_t shard) {
    return bin_cost[b][bin_on_shard[b][shard]];
  };
  for (std::size_t swaps = 0; swaps < kMaxSwaps; ++swaps) {
    const auto h =
        static_cast<std::size_t>(std::max_element(load.begin(), load.end()) - load.begin());
    if (load[h] <= target) return;
    Cost best = load[h];
    std::size_t best_bucket = 0;
    std::size_t best_shard = h;
    for (const std::size_t b : order) {
      for (std::size_t s = 0; s < load.size(); ++s) {
        if (on(b, s) >= on(b, h)) continue;
        const Cost after = std::max(load[h] - on(b, h) + on(b, s), load[s] - on(b, s) + on(b, h));
        if (after < best) {
          best = after;
          best_bucket = b;
          best_shard = s;
        }
      }
    }
    if (best_shard == h) return;
    const Cost on_h = on(best_bucket, h);
    const Cost on_s = on(best_bucket, best_shard);
    load[h] += on_s - on_h;
    load[best_shard] += on_h - on_s;
    std::swap(bin_on_shard[best_bucket][h], bin_on_shard[best_bucket][best_shard]);
  }
}

}  // namespace

std::optional<BinOf> pack_by_cost(std::span<const Size> span, std::span<const Cost> cost,
                                  std::size_t from, std::size_t to, Shards shards, Size capacity) {
  if (shards.count > 64) return std::nullopt;
  std::vector<std::size_t> items(to - from);
  std::iota(items.begin(), items.end(), from);
  std::stable_sort(items.begin(), items.end(), [&](std::size_t a, std::size_t b) {
    return cost[a] > cost[b] || (cost[a] == cost[b] && span[a] > span[b]);
  });
  BinOf bin_of(to - from);
  std::vector<Size> room(static_cast<std::size_t>(shards.count), capacity);
  std::vector<Cost> load(static_cast<std::size_t>(shards.count), 0);
  for (const std::size_t q : items) {
    std::size_t best = room.size();
    for (std::size_t bin = 0; bin < room.size(); ++bin) {
      if (room[bin] >= span[q] && (best == room.size() || load[bin] < load[best])) best = bin;
    }
    if (best == room.size()) return std::nullopt;
    room[best] -= span[q];
    load[best] += cost[q];
    bin_of[q - from] = static_cast<std::int64_t>(best);
  }
  return bin_of;
}

std::vector<std::vector<std::int64_t>> assign_bins(const std::vector<std::vector<Cost>>& bin_cost,
                                                   std::vector<Cost>& load, Cost target) {
  const auto heaviest_bin = [&](std::size_t b) {
    return *std::max_element(bin_cost[b].begin(), bin_cost[b].end());
  };
  std::vector<std::size_t> order(bin_cost.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return heaviest_bin(a) > heaviest_bin(b); });
  BinOnShard bin_on_shard(bin_cost.size(), std::vector<std::size_t>(load.size()));
  for (const std::size_t b : order) place(bin_cost[b], load, bin_on_shard[b]);
  swap_bins(bin_cost, order, load, target, bin_on_shard);
  std::vector<std::vector<std::int64_t>> shard_of_bin(bin_cost.size(),
                                                      std::vector<std::int64_t>(load.size()));
  for (std::size_t b = 0; b < bin_cost.size(); ++b) {
    for (std::size_t s = 0; s < load.size(); ++s) {
      shard_of_bin[b][bin_on_shard[b][s]] = static_cast<std::int64_t>(s);
    }
  }
  return shard_of_bin;
}

}  // namespace paramlayout::layerwise
