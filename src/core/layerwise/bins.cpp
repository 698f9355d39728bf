#include "layerwise/bins.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

namespace paramlayout::layerwise {

Size Items::total() const {
  Size total = 0;
  for (const Run& run : runs) total += run.span * static_cast<Size>(run.end - run.first);
  return total;
}

namespace {

/// Buckets of at most this many distinct spans (most: layers repeat) are sorted by span
/// without comparing positions: each goes straight to its run.
constexpr std::size_t kFewSpans = 16;

/// The distinct spans of positions [from, to), largest first; nothing where there are more
/// than kFewSpans.
std::optional<std::vector<Size>> few_spans(std::span<const Size> span, std::size_t from,
                                           std::size_t to) {
  std::vector<Size> spans;
  for (std::size_t q = from; q < to; ++q) {
    if (std::find(spans.begin(), spans.end(), span[q]) != spans.end()) continue;
    if (spans.size() == kFewSpans) return std::nullopt;
    spans.push_back(span[q]);
  }
  std::sort(spans.begin(), spans.end(), std::greater<>());
  return spans;
}

/// Positions [from, to), whose distinct spans are `spans` (largest first), into `items`:
/// each position straight to its run.
void place_by_run(std::span<const Size> span, std::size_t from, std::size_t to,
                  const std::vector<Size>& spans, Items& items) {
  const auto run_of = [&](std::size_t q) {
    return static_cast<std::size_t>(std::find(spans.begin(), spans.end(), span[q]) - spans.begin());
  };
  std::vector<std::size_t> count(spans.size(), 0);
  for (std::size_t q = from; q < to; ++q) ++count[run_of(q)];
  std::vector<std::size_t> next(spans.size());  // of each run, where its next position goes
  for (std::size_t r = 0, at = 0; r < spans.size(); at += count[r++]) {
    items.runs.push_back({spans[r], at, at + count[r]});
    next[r] = at;
  }
  for (std::size_t q = from; q < to; ++q) items.positions[next[run_of(q)]++] = q;
}

/// Positions [from, to) into `items` by comparing spans.
void sort_by_span(std::span<const Size> span, std::size_t from, Items& items) {
  std::iota(items.positions.begin(), items.positions.end(), from);
  std::sort(items.positions.begin(), items.positions.end(), [&](std::size_t a, std::size_t b) {
    return span[a] > span[b] || (span[a] == span[b] && a < b);
  });
  for (std::size_t i = 0; i < items.positions.size(); ++i) {
    const Size size = span[items.positions[i]];
    if (items.runs.empty() || items.runs.back().span != size) items.runs.push_back({size, i, i});
    ++items.runs.back().end;
  }
}

}  // namespace

Items by_decreasing_span(std::span<const Size> span, std::size_t from, std::size_t to) {
  Items items;
  items.from = from;
  items.positions.resize(to - from);
  if (const std::optional<std::vector<Size>> spans = few_spans(span, from, to)) {
    place_by_run(span, from, to, *spans, items);
  } else {
    sort_by_span(span, from, items);
  }
  for (const Items::Run& run : items.runs) items.gcd = std::gcd(items.gcd, run.span);
  return items;
}

namespace {

/// Bins of one capacity, filled best-fit: an item goes to the fullest bin it fits in (the
/// first on ties). Bins are kept as groups of consecutive bins with equal room, sorted by
/// (room, first bin). Equal items fill the best bin before the next (it stays the fullest
/// that fits), and the next is the group's next bin, so a run of equal items costs a few
/// operations per group it reaches, not one per item: capacity searches of buckets of
/// hundreds of experts at dp 512 pack fast.
class Bins {
 public:
  Bins(std::int64_t count, Size capacity) : capacity_(capacity), groups_{{capacity, 0, count}} {}

  /// Puts `count` items of `size`, calling `into(first, bins, n)` when each of `bins` bins
  /// from `first` takes n of them; false when one found no room.
  template <class Into>
  bool put(Size size, std::int64_t count, Into into) {
    while (count > 0) {
      auto it = std::lower_bound(groups_.begin(), groups_.end(), Group{size, -1, 0});
      if (it == groups_.end()) return false;
      Group g = *it;
      groups_.erase(it);
      const Size fits = g.room / size;
      const std::int64_t full = std::min(g.count, count / fits);
      if (full > 0) {  // bins that take `fits` each
        insert({g.room - fits * size, g.first, full});
        into(g.first, full, fits);
        count -= full * fits;
        g.first += full;
        g.count -= full;
      }
      if (count > 0 && g.count > 0) {  // fewer than `fits` left: one bin takes them
        insert({g.room - count * size, g.first, 1});
        into(g.first, 1, count);
        count = 0;
        ++g.first;
        --g.count;
      }
      if (g.count > 0) insert(g);
    }
    return true;
  }

  /// What the fullest bin holds.
  Size fullest() const { return capacity_ - groups_.front().room; }

 private:
  struct Group {
    Size room;
    std::int64_t first;
    std::int64_t count;
    bool operator<(const Group& o) const {
      return room < o.room || (room == o.room && first < o.first);
    }
  };
  void insert(const Group& g) {
    groups_.insert(std::upper_bound(groups_.begin(), groups_.end(), g), g);
  }

  Size capacity_;
  std::vector<Group> groups_;  ///< sorted; few, since bins fill in runs
};

}  // namespace

std::optional<Size> best_fit(const Items& items, std::int64_t bins, Size capacity, BinOf* bin_of) {
  Bins packed(bins, capacity);
  for (const Items::Run& run : items.runs) {
    std::size_t i = run.first;  // the run's next item
    const auto into = [&](std::int64_t first, std::int64_t count, std::int64_t n) {
      if (!bin_of) return;
      for (std::int64_t b = first; b < first + count; ++b) {
        for (std::int64_t k = 0; k < n; ++k) (*bin_of)[items.positions[i++] - items.from] = b;
      }
    };
    if (!packed.put(run.span, static_cast<std::int64_t>(run.end - run.first), into)) {
      return std::nullopt;
    }
  }
  return packed.fullest();
}

}  // namespace paramlayout::layerwise
