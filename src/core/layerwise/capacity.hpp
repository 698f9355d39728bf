// The capacity search: about the smallest shard size at which a bucket's params pack.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "layerwise/bins.hpp"
#include "layerwise/fill.hpp"

namespace paramlayout::layerwise {

/// The least capacity that could hold a bucket of `total` elements whose largest param spans
/// `largest`: no packing does better.
Size lowest_capacity(Shards shards, Size total, Size largest);

/// The least capacity, at least `at_least`, that could hold `items`: their largest, their
/// total over the shards, and since of the k x dp + 1 largest some shard holds k + 1, the
/// k + 1 smallest of those. No packing does better; the search starts here.
Size least_capacity(const Items& items, Shards shards, Size at_least);

/// A capacity at which a bucket packs, and how.
struct Fit {
  Size capacity = 0;
  std::optional<Filling> filling;  ///< where filled bin by bin, else best-fit's packing
};

/// Where best-fit is known to pack a bucket: at `capacity`, its fullest shard holding
/// `fullest`. The search goes on from there.
struct Hint {
  Size capacity = 0;
  Size fullest = 0;
};

/// About the smallest capacity (within 1/1024) from least_capacity up at which `items`
/// pack: galloping up to one where best-fit-decreasing packs, then bisecting down; a
/// packing at one capacity also holds at its fullest shard's, which is where the search goes
/// on. With `fill`, where bin-by-bin filling applies and packs just below best-fit's
/// capacity, a second bisection with it.
Fit smallest_fit(const Items& items, Shards shards, Size at_least, bool fill, Hint hint = {});

/// The shard of each of `items` in `fit`.
BinOf bins_at(const Items& items, Shards shards, const Fit& fit);

/// smallest_fit of the buckets of one buffer, each bucket asked once: buckets of experts
/// repeat exactly. A bucket is known by its params' spans and `at_least`; its first search
/// (with its `fill` and hint) is the one kept.
class Capacities {
 public:
  Capacities(std::span<const Size> span, Shards shards) : span_(span), shards_(shards) {}

  /// smallest_fit of positions [from, to).
  const Fit& smallest_fit(std::size_t from, std::size_t to, Size at_least, bool fill,
                          Hint hint = {});

 private:
  /// A bucket as the memo knows it: `at_least`, then its spans. Looked up by a view of
  /// the spans, stored with a copy.
  template <class Spans>
  struct Key {
    Size at_least;
    Spans spans;
  };
  using Stored = Key<std::vector<Size>>;
  using Asked = Key<std::span<const Size>>;
  struct Less {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      if (a.at_least != b.at_least) return a.at_least < b.at_least;
      return std::lexicographical_compare(a.spans.begin(), a.spans.end(), b.spans.begin(),
                                          b.spans.end());
    }
  };

  std::span<const Size> span_;
  Shards shards_;
  std::map<Stored, Fit, Less> fits_;
};

}  // namespace paramlayout::layerwise
