#include "layerwise/cuts.hpp"

#include <algorithm>
#include <array>

namespace paramlayout::layerwise {
namespace {

/// How far (in params) a cut between two buckets moves to make them smaller.
constexpr std::size_t kCutShift = 4;
/// A move that cannot gain more than 1/kResolution of the pair is not tried.
constexpr Size kResolution = 1024;

/// The least capacity of positions [from, to): lowest_capacity of their total and largest.
Size lowest_capacity_of(const Run& run, std::size_t from, std::size_t to) {
  Size largest = 0;
  for (std::size_t q = from; q < to; ++q) largest = std::max(largest, run.span[q]);
  return lowest_capacity(run.shards, run.before[to] - run.before[from], largest);
}

/// The cut ending bucket `k` of `count` nearest the run's k / count point, given that the
/// bucket starts at `q`: past each param that ends by it, and past the next one too where
/// that ends nearer (and past one at least).
std::size_t cut_near(const Run& run, std::size_t q, std::size_t k, std::size_t count) {
  if (k == count) return run.end;
  const Size run_total = run.before[run.end] - run.before[run.from];
  const Size goal =
      run.before[run.from] + static_cast<Size>(Wide{run_total} * Wide{k} / Wide{count});
  std::size_t to = static_cast<std::size_t>(
      std::upper_bound(run.before.begin() + q + 1, run.before.begin() + run.end + 1, goal) -
      run.before.begin() - 1);
  if (to < run.end && (to == q || goal - run.before[to] > run.before[to + 1] - goal)) {
    ++to;
  }
  return to;
}

/// The least capacities, for each cut `at` within reach of the one between `left` and
/// `right` (by at - first), of the left bucket [left.from, at) and of the right [at,
/// right.to).
struct CutBounds {
  std::size_t first, last;  ///< the cuts within reach, [first, last]
  std::array<Size, 2 * kCutShift + 1> left{};
  std::array<Size, 2 * kCutShift + 1> right{};
};

CutBounds cut_bounds(const Run& run, const Bucket& left, const Bucket& right) {
  const std::size_t cut = left.to;
  CutBounds b;
  b.first = cut - std::min(cut - left.from - 1, kCutShift);
  b.last = std::min(cut + kCutShift, right.to - 1);
  Size total = 0;
  Size largest = 0;
  for (std::size_t q = left.from; q < b.last; ++q) {
    total += run.span[q];
    largest = std::max(largest, run.span[q]);
    if (q + 1 >= b.first) b.left[q + 1 - b.first] = lowest_capacity(run.shards, total, largest);
  }
  total = largest = 0;
  for (std::size_t q = right.to; q-- > b.first;) {
    total += run.span[q];
    largest = std::max(largest, run.span[q]);
    if (q <= b.last) b.right[q - b.first] = lowest_capacity(run.shards, total, largest);
  }
  return b;
}

/// The size of `left` and `right` with their cut moved to `at`, where that is below `best`;
/// else nothing. Most moves cannot win, and best-fit on each side at the largest capacity
/// that could tells (bin-by-bin filling would tell a little more, at far more cost); the
/// right side first, as it fails more often.
std::optional<Size> size_with_cut(const Run& run, const Bucket& left, const Bucket& right,
                                  std::size_t at, const CutBounds& bounds, Size best, Size target,
                                  Capacities& capacities) {
  const Size dp = run.shards.count;
  const Size left_lowest = bounds.left[at - bounds.first];
  const Size right_lowest = bounds.right[at - bounds.first];
  // A move gains at most what the lower bounds leave; too little to resolve is not tried.
  if (dp * (left_lowest + right_lowest) + best / kResolution >= best) return std::nullopt;
  const Size room = best / dp - right_lowest;
  if (room < target) return std::nullopt;
  const Items right_items = by_decreasing_span(run.span, at, right.to);
  const Size right_room = best / dp - std::max(left_lowest, target) - run.shards.divisor;
  if (!best_fit(right_items, dp, right_room)) return std::nullopt;
  const std::optional<Size> left_fullest =
      best_fit(by_decreasing_span(run.span, left.from, at), dp, room);
  if (!left_fullest) return std::nullopt;
  const Size left_size =
      dp * capacities.smallest_fit(left.from, at, target, true, {room, *left_fullest}).capacity;
  if (left_size + dp * right_lowest >= best) return std::nullopt;
  if (!best_fit(right_items, dp, (best - left_size) / dp - run.shards.divisor)) {
    return std::nullopt;
  }
  const Size size = left_size + dp * capacities.smallest_fit(at, right.to, target, true).capacity;
  if (size >= best) return std::nullopt;
  return size;
}

/// Sets `bucket`'s fit and size: the smallest fit of its params.
void fit(const Run& run, Bucket& bucket, Size target, Capacities& capacities) {
  bucket.fit = capacities.smallest_fit(bucket.from, bucket.to, target, run.tighten());
  bucket.size = bucket.fit.capacity * run.shards.count;
}

}  // namespace

Size size_of(const Buckets& buckets) {
  Size size = 0;
  for (const Bucket& b : buckets) size += b.size;
  return size;
}

bool Run::long_run() const { return size() > 2000; }

std::size_t greedy_count(const Run& run, Size target) {
  const Size dp = run.shards.count;
  std::size_t buckets = 0;
  for (std::size_t q = run.from; q < run.end; ++buckets) {
    Size largest = 0;
    Size total = 0;
    for (; q < run.end; ++q) {
      const Size next_largest = std::max(largest, run.span[q]);
      if (total > 0 && total + run.span[q] > dp * std::max(target, next_largest)) break;
      largest = next_largest;
      total += run.span[q];
    }
  }
  return buckets;
}

std::vector<std::size_t> counts_to_try(const Run& run, std::size_t greedy) {
  std::vector<std::size_t> counts;
  for (std::size_t fewer = 0; fewer <= (run.long_run() ? 1 : 2) && fewer < greedy; ++fewer) {
    counts.push_back(greedy - fewer);
  }
  for (std::size_t percent = 50; percent < 100; percent += run.long_run() ? 25 : 10) {
    counts.push_back(std::max<std::size_t>(1, greedy * percent / 100));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::optional<Buckets> cut(const Run& run, std::size_t count, Size target, Size beat,
                           Capacities& capacities) {
  // First the buckets and their lower bounds, to give up before any packing where even
  // those come to `beat`; then each bucket's search, giving up as soon as the sizes found
  // and the bounds left do.
  Buckets out;
  std::vector<Size> lowest;
  out.reserve(count);
  lowest.reserve(count);
  Size lowest_left = 0;
  for (std::size_t k = 1, q = run.from; k <= count && q < run.end; ++k) {
    const std::size_t to = cut_near(run, q, k, count);
    out.push_back({q, to, 0, Fit{}, false});
    lowest.push_back(run.shards.count * lowest_capacity_of(run, q, to));
    lowest_left += lowest.back();
    if (lowest_left >= beat) return std::nullopt;
    q = to;
  }
  Size size = 0;
  for (std::size_t b = 0; b < out.size(); ++b) {
    if (size + lowest_left >= beat) return std::nullopt;
    fit(run, out[b], target, capacities);
    size += out[b].size;
    lowest_left -= lowest[b];
  }
  if (size >= beat) return std::nullopt;
  return out;
}

void refine_cuts(const Run& run, Buckets& buckets, Size target, Capacities& capacities) {
  for (std::size_t b = 0; b + 1 < buckets.size(); ++b) {
    Bucket& left = buckets[b];
    Bucket& right = buckets[b + 1];
    const std::size_t cut = left.to;
    const CutBounds bounds = cut_bounds(run, left, right);
    Size best = left.size + right.size;
    const Size lowest =
        run.shards.count * (bounds.left[cut - bounds.first] + bounds.right[cut - bounds.first]);
    if (best == lowest) continue;
    std::size_t best_cut = cut;
    for (std::size_t shift = 1; shift <= kCutShift; ++shift) {
      for (const std::size_t at : {cut - shift, cut + shift}) {
        if (at < bounds.first || at > bounds.last) continue;  // also a cut - shift below 0
        if (const std::optional<Size> size =
                size_with_cut(run, left, right, at, bounds, best, target, capacities)) {
          best = *size;
          best_cut = at;
        }
      }
    }
    if (best_cut == cut) continue;
    left.to = right.from = best_cut;
    fit(run, left, target, capacities);
    fit(run, right, target, capacities);
  }
}

std::optional<Buckets> cut_run(const Run& run, std::optional<std::int64_t> bucket_size, Size budget,
                               Capacities& capacities) {
  const Size dp = run.shards.count;
  if (!bucket_size) {
    Bucket whole{run.from, run.end, 0, Fit{}, false};
    fit(run, whole, 0, capacities);
    if (whole.size > budget) return std::nullopt;
    return Buckets{whole};
  }
  // How many buckets: greedily, each takes params while they fit dp shards of
  // max(bucket_size / dp, its largest param).
  const Wide least_shard = (Wide{*bucket_size} + dp - 1) / dp;
  if (dp * least_shard > budget) return std::nullopt;  // no bucket can be that small
  const auto target = static_cast<Size>(least_shard);
  // Cut into that many and a few fewer (larger buckets can pad much less where the largest
  // params set the shard size), from the fewest up, since fewer usually pad less and rule
  // more counts out early; the least padding wins, and on a tie the most buckets.
  std::optional<Buckets> best;
  for (const std::size_t count : counts_to_try(run, greedy_count(run, target))) {
    const Size beat = best ? size_of(*best) + 1 : budget + 1;
    if (std::optional<Buckets> option = cut(run, count, target, beat, capacities)) {
      best = std::move(option);
    }
  }
  if (best && run.tighten()) refine_cuts(run, *best, target, capacities);
  return best;
}

}  // namespace paramlayout::layerwise
