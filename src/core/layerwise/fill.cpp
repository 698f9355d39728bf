#include "layerwise/fill.hpp"

#include <algorithm>

namespace paramlayout::layerwise {
namespace {

/// A bin's search gives up after this many steps.
constexpr int kSearchSteps = 128;

using Counts = std::array<std::int64_t, kFillMaxSizes>;

/// The search for one bin's best filling: how many items of each size (largest first) fill
/// `room` best.
class BinSearch {
 public:
  BinSearch(const Counts& span, const Counts& left, std::size_t sizes)
      : span_(span), left_(left), sizes_(sizes) {
    after_[sizes] = 0;
    for (std::size_t i = sizes; i-- > 0;) after_[i] = after_[i + 1] + span[i] * left[i];
  }

  /// Depth first from size `first` with the bin empty: of each size the most that fit,
  /// then fewer; a choice is dropped where even every smaller item left could not beat the
  /// best. Stops at `reach` (no filling can do better) or after kSearchSteps steps. Returns
  /// the best fill; `best` takes its counts.
  Size search(std::size_t first, Size room, Size reach, Counts& best) {
    Size best_fill = -1;
    int steps = kSearchSteps;
    std::size_t i = first;
    at_[i] = 0;
    for (;;) {  // at size i (or past the last) with the bin filled to at_[i]
      if (at_[i] > best_fill) {
        best_fill = at_[i];
        best.fill(0);
        std::copy(count_.begin() + first, count_.begin() + i, best.begin() + first);
        if (best_fill == reach) return best_fill;
      }
      if (i < sizes_) {
        if (--steps < 0) return best_fill;
        count_[i] = std::min(left_[i], (room - at_[i]) / span_[i]);
        at_[i + 1] = at_[i] + count_[i] * span_[i];
        if (at_[i + 1] + after_[i + 1] > best_fill) {
          ++i;
          continue;
        }
      }
      for (;;) {  // size i is done: back to the one before, to try one fewer there
        if (i == first) return best_fill;
        --i;
        at_[i + 1] -= span_[i];
        if (--count_[i] >= 0 && at_[i + 1] + after_[i + 1] > best_fill) break;
      }
      ++i;
    }
  }

 private:
  const Counts& span_;
  const Counts& left_;  ///< of each size, not yet placed
  std::size_t sizes_;
  std::array<Size, kFillMaxSizes + 1> after_{};  ///< what sizes [i, n) have left, in all
  std::array<Size, kFillMaxSizes + 1> at_{};     ///< the fill on reaching each size
  Counts count_{};                               ///< of each size, being tried
};

}  // namespace

bool can_fill(const Items& items, std::int64_t bins) {
  return bins <= kFillMaxBins && items.runs.size() <= kFillMaxSizes;
}

std::optional<Size> fill_bins(const Items& items, std::int64_t bins, Size capacity,
                              Filling& filling) {
  filling.clear();
  const std::size_t n = items.runs.size();
  Counts span{};
  Counts left{};
  Size slack = bins * capacity;  // what the bins can leave empty and still take every item
  for (std::size_t i = 0; i < n; ++i) {
    span[i] = items.runs[i].span;
    left[i] = static_cast<std::int64_t>(items.runs[i].end - items.runs[i].first);
    slack -= span[i] * left[i];
  }
  if (slack < 0) return std::nullopt;  // and so every sum below fits
  Size fullest = 0;
  std::size_t first = 0;  // the largest size with items left
  for (std::int64_t bin = 0; bin < bins;) {
    while (first < n && left[first] == 0) ++first;
    if (first == n) break;
    if (span[first] > capacity) return std::nullopt;
    --left[first];  // the bin's first item: the largest left
    const Size room = capacity - span[first];
    Counts best{};
    const Size filled =
        BinSearch(span, left, n).search(first, room, room - room % items.gcd, best);
    ++left[first];
    ++best[first];
    fullest = std::max(fullest, span[first] + filled);
    std::int64_t repeat = bins - bin;
    for (std::size_t i = first; i < n; ++i) {
      if (best[i] > 0) repeat = std::min(repeat, left[i] / best[i]);
    }
    for (std::size_t i = first; i < n; ++i) left[i] -= repeat * best[i];
    filling.push_back({repeat, best});
    bin += repeat;
    slack -= repeat * (room - filled);
    if (slack < 0) return std::nullopt;
  }
  while (first < n && left[first] == 0) ++first;
  if (first < n) return std::nullopt;
  return fullest;
}

BinOf bins_of(const Items& items, const Filling& filling) {
  BinOf bin_of(items.size());
  std::array<std::size_t, kFillMaxSizes> next{};  // of each run, the next item to place
  for (std::size_t i = 0; i < items.runs.size(); ++i) next[i] = items.runs[i].first;
  std::int64_t bin = 0;
  for (const FilledBins& bins : filling) {
    for (std::int64_t r = 0; r < bins.repeat; ++r, ++bin) {
      for (std::size_t i = 0; i < items.runs.size(); ++i) {
        for (std::int64_t k = 0; k < bins.take[i]; ++k) {
          bin_of[items.positions[next[i]++] - items.from] = bin;
        }
      }
    }
  }
  return bin_of;
}

}  // namespace paramlayout::layerwise
