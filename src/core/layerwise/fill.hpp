// Bin-by-bin filling (minimum bin slack): each bin in turn takes the largest item left and
// the items that fill it best, found by a bounded search over the item sizes. Where few
// sizes repeat (transformer layers) this packs tighter than best-fit, which spreads the
// large items first and strands room no small one fits.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "layerwise/bins.hpp"

namespace paramlayout::layerwise {

/// Filling applies to buckets of at most this many shards and this many distinct spans.
inline constexpr std::int64_t kFillMaxBins = 64;
inline constexpr std::size_t kFillMaxSizes = 12;

/// One bin's choice, taken by `repeat` bins in a row: how many items of each run of
/// `Items::runs`.
struct FilledBins {
  std::int64_t repeat;
  std::array<std::int64_t, kFillMaxSizes> take;
};
/// A packing by fill_bins, bin after bin.
using Filling = std::vector<FilledBins>;

/// Whether fill_bins applies to `items` in `bins` bins.
bool can_fill(const Items& items, std::int64_t bins);

/// Fills `bins` bins of `capacity` one at a time with `items` (can_fill). A bin's best
/// choice stays best for the next bins while its items last, so it is searched once. What
/// the fullest bin holds, or nothing when some item is left over; `filling` takes the
/// bins' choices.
std::optional<Size> fill_bins(const Items& items, std::int64_t bins, Size capacity,
                              Filling& filling);

/// The bin of each item, as `filling` (of `items`) puts them.
BinOf bins_of(const Items& items, const Filling& filling);

}  // namespace paramlayout::layerwise
