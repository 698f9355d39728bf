// Cutting a run of params (between shared embeddings) into buckets: as many as a greedy pass
// needs, or a few fewer where that pads less, of about equal totals so that the last bucket
// is as full as the others; then each cut moved a little where the pair of buckets gets
// smaller.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "layerwise/capacity.hpp"

namespace paramlayout::layerwise {

/// Positions [from, to) in one bucket of `size` elements (dp shards of one capacity) as
/// `fit` packs them; a shared embedding alone, its whole bucket its span, where
/// `shared_embedding`.
struct Bucket {
  std::size_t from = 0;
  std::size_t to = 0;
  Size size = 0;
  Fit fit;
  bool shared_embedding = false;
};
using Buckets = std::vector<Bucket>;

/// The buckets' size in all.
Size size_of(const Buckets& buckets);

/// A run of params to cut: positions [from, end) of a buffer whose params span `span`,
/// `before[q]` the spans of the positions before q in all.
struct Run {
  std::span<const Size> span;
  std::span<const Size> before;
  std::size_t from;
  std::size_t end;
  Shards shards;
  /// Whether to fill bins one at a time and move cuts (tighter, but blind to cost).
  bool search;

  std::size_t size() const { return end - from; }
  /// More than 2000 params (thousands of experts): tries fewer bucket counts, and neither
  /// fills bins one at a time nor moves cuts, to keep planning fast.
  bool long_run() const;
  bool tighten() const { return search && !long_run(); }
};

/// How many buckets the run takes greedily: each takes params while they fit dp shards of
/// max(`target`, its largest param).
std::size_t greedy_count(const Run& run, Size target);

/// The bucket counts tried for a run that takes `greedy` greedily: a few fewer, and down to
/// half of it; ascending.
std::vector<std::size_t> counts_to_try(const Run& run, std::size_t greedy);

/// The run in `count` buckets of about equal totals, each with the smallest shards that
/// hold it (of at least `target`); nothing when they cannot come to fewer than `beat`
/// elements.
std::optional<Buckets> cut(const Run& run, std::size_t count, Size target, Size beat,
                           Capacities& capacities);

/// Moves each cut between two of `buckets` by up to 4 params either way where that makes
/// the pair smaller: equal totals are a good start, but the sizes of the params decide
/// which cut packs best.
void refine_cuts(const Run& run, Buckets& buckets, Size target, Capacities& capacities);

/// The run cut into buckets in at most `budget` elements (bucket_size a soft target);
/// nothing where it does not fit.
std::optional<Buckets> cut_run(const Run& run, std::optional<std::int64_t> bucket_size, Size budget,
                               Capacities& capacities);

}  // namespace paramlayout::layerwise
