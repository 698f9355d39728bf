#include "layerwise/capacity.hpp"

#include <algorithm>

namespace paramlayout::layerwise {
namespace {

/// Capacities are searched to within 1/kResolution.
constexpr Size kResolution = 1024;

/// The search's state: the largest capacity known to fail, the smallest known to pack.
struct Bracket {
  Size failed;
  Size capacity;
};

/// Narrows `bracket` by bisection with `pack` (what the fullest shard holds at a capacity,
/// or nothing) to within `resolution`; true when it packed below the bracket's capacity. A
/// capacity that fails fails up to the next multiple of the spans' gcd minus one, where only
/// room no span can use grows.
template <class Pack>
bool bisect(Bracket& bracket, const Items& items, Shards shards, Size resolution, Pack pack) {
  bool packed = false;
  while (bracket.capacity - bracket.failed > resolution) {
    const Size middle = shards.pad(bracket.failed + (bracket.capacity - bracket.failed) / 2);
    if (middle >= bracket.capacity) break;
    if (const std::optional<Size> fullest = pack(middle)) {
      bracket.capacity = shards.pad(*fullest);
      packed = true;
    } else {
      bracket.failed = middle - middle % items.gcd + items.gcd - 1;
    }
  }
  return packed;
}

}  // namespace

Size lowest_capacity(Shards shards, Size total, Size largest) {
  return shards.pad(std::max(largest, (total + shards.count - 1) / shards.count));
}

Size least_capacity(const Items& items, Shards shards, Size at_least) {
  const std::size_t count = items.size();
  const auto dp = static_cast<std::size_t>(shards.count);
  Size crowded = 0;
  auto run = items.runs.begin();  // the run of the i-th largest, i rising
  for (std::size_t k = 1; k * dp < count; ++k) {
    Size smallest_k = 0;  // of items [k dp - k, k dp]
    for (std::size_t i = k * dp - k; i <= k * dp; ++i) {
      while (run->end <= i) ++run;
      smallest_k += run->span;
    }
    crowded = std::max(crowded, smallest_k);
    if (k * k > count) break;  // enough: the bound flattens, the sums lengthen
  }
  return std::max({shards.pad(at_least), lowest_capacity(shards, items.total(), items.largest()),
                   shards.pad(crowded)});
}

namespace {

/// The bracket from galloping up from `lowest` to a capacity at which best-fit packs
/// `items` (unless `hint` knows one), its capacity that packing's fullest shard's.
Bracket gallop(const Items& items, Shards shards, Size lowest, Hint hint) {
  Bracket bracket{lowest - 1, lowest};
  std::optional<Size> fullest =
      hint.capacity > lowest ? std::optional{hint.fullest} : best_fit(items, shards.count, lowest);
  for (Size step = std::max<Size>(lowest / 256, shards.divisor); !fullest;) {
    bracket.failed = bracket.capacity - bracket.capacity % items.gcd + items.gcd - 1;
    do {  // no need to try where it surely fails
      bracket.capacity = shards.pad(lowest + step);
      step *= 2;
    } while (bracket.capacity <= bracket.failed);
    fullest = best_fit(items, shards.count, bracket.capacity);
  }
  bracket.capacity = shards.pad(*fullest);
  return bracket;
}

/// Below best-fit's `fit`, bin-by-bin filling, bisecting from `lowest` up, unless it cannot
/// pack just below that capacity either (most buckets). The packing kept is the last that
/// packed: the capacity is its fullest shard's.
void fill_below(const Items& items, Shards shards, Size lowest, Size resolution, Fit& fit) {
  Filling trial;
  const std::optional<Size> tighter =
      fill_bins(items, shards.count, fit.capacity - shards.divisor, trial);
  if (!tighter) return;
  Bracket bracket{lowest - 1, shards.pad(*tighter)};
  fit.filling = trial;
  bisect(bracket, items, shards, resolution, [&](Size c) {
    const std::optional<Size> packed = fill_bins(items, shards.count, c, trial);
    if (packed) fit.filling = trial;
    return packed;
  });
  fit.capacity = bracket.capacity;
}

}  // namespace

Fit smallest_fit(const Items& items, Shards shards, Size at_least, bool fill, Hint hint) {
  const Size lowest = least_capacity(items, shards, at_least);
  const Size resolution = std::max<Size>(lowest / kResolution, shards.divisor);
  Bracket bracket = gallop(items, shards, lowest, hint);
  bisect(bracket, items, shards, resolution,
         [&](Size c) { return best_fit(items, shards.count, c); });
  Fit fit{bracket.capacity, std::nullopt};
  if (fill && fit.capacity > lowest && can_fill(items, shards.count)) {
    fill_below(items, shards, lowest, resolution, fit);
  }
  return fit;
}

BinOf bins_at(const Items& items, Shards shards, const Fit& fit) {
  if (fit.filling) return bins_of(items, *fit.filling);
  BinOf bin_of(items.size());
  best_fit(items, shards.count, fit.capacity, &bin_of);
  return bin_of;
}

const Fit& Capacities::smallest_fit(std::size_t from, std::size_t to, Size at_least, bool fill,
                                    Hint hint) {
  const Asked asked{at_least, span_.subspan(from, to - from)};
  auto found = fits_.find(asked);
  if (found == fits_.end()) {
    const Items items = by_decreasing_span(span_, from, to);
    Stored key{at_least, {asked.spans.begin(), asked.spans.end()}};
    found =
        fits_.emplace(std::move(key), layerwise::smallest_fit(items, shards_, at_least, fill, hint))
            .first;
  }
  return found->second;
}

}  // namespace paramlayout::layerwise
