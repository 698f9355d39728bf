#include "layerwise/fill.hpp"

#include <algorithm>
#include <utility>

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

/// The items not yet in a bin, by size, largest first.
struct Stock {
  Counts span{};
  Counts left{};
  std::size_t sizes = 0;
  Size gcd = 0;
  std::size_t first = 0;  ///< the largest size with items left, once `any_left` tells

  explicit Stock(const Items& items) : sizes(items.runs.size()), gcd(items.gcd) {
    for (std::size_t i = 0; i < sizes; ++i) {
      span[i] = items.runs[i].span;
      left[i] = static_cast<std::int64_t>(items.runs[i].end - items.runs[i].first);
    }
  }

  bool any_left() {
    while (first < sizes && left[first] == 0) ++first;
    return first < sizes;
  }

  /// The best filling of a bin of `capacity` that the largest item left opens: of each
  /// size, how many; and what the bin then holds.
  std::pair<Counts, Size> best_bin(Size capacity) {
    --left[first];
    const Size room = capacity - span[first];
    Counts best{};
    const Size filled = BinSearch(span, left, sizes).search(first, room, room - room % gcd, best);
    ++left[first];
    ++best[first];
    return {best, span[first] + filled};
  }

  /// Takes `take` for as many bins in a row as the items last, at most `bins`: how many.
  std::int64_t take_repeatedly(const Counts& take, std::int64_t bins) {
    for (std::size_t i = first; i < sizes; ++i) {
      if (take[i] > 0) bins = std::min(bins, left[i] / take[i]);
    }
    for (std::size_t i = first; i < sizes; ++i) left[i] -= bins * take[i];
    return bins;
  }
};

}  // namespace

bool can_fill(const Items& items, std::int64_t bins) {
  return bins <= kFillMaxBins && items.runs.size() <= kFillMaxSizes;
}

std::optional<Size> fill_bins(const Items& items, std::int64_t bins, Size capacity,
                              Filling& filling) {
  filling.clear();
  Stock stock(items);
  Size slack = bins * capacity - items.total();  // what the bins can leave empty
  if (slack < 0) return std::nullopt;            // (and so every sum below fits)
  Size fullest = 0;
  for (std::int64_t bin = 0; bin < bins && stock.any_left();) {
    if (stock.span[stock.first] > capacity) return std::nullopt;
    const auto [take, filled] = stock.best_bin(capacity);
    fullest = std::max(fullest, filled);
    const std::int64_t repeat = stock.take_repeatedly(take, bins - bin);
    filling.push_back({repeat, take});
    bin += repeat;
    slack -= repeat * (capacity - filled);
    if (slack < 0) return std::nullopt;
  }
  if (stock.any_left()) return std::nullopt;
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
