// The balanced packer's capacity search and cuts, on buckets small enough to work out by
// hand (divisor 1 unless said: any size is a capacity).
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "layerwise/capacity.hpp"
#include "layerwise/cuts.hpp"

using namespace paramlayout::layerwise;

namespace {

/// The spans before each position, in all.
std::vector<Size> prefix(const std::vector<Size>& span) {
  std::vector<Size> before(span.size() + 1, 0);
  std::partial_sum(span.begin(), span.end(), before.begin() + 1);
  return before;
}

Items all_of(const std::vector<Size>& span) { return by_decreasing_span(span, 0, span.size()); }

}  // namespace

TEST_SUITE("layerwise") {
  TEST_CASE("no capacity below the bounds can hold a bucket") {
    // The largest param, the total over dp, padded to the shard divisor.
    CHECK(lowest_capacity({2, 64}, 300, 100) == 192);
    CHECK(lowest_capacity({2, 64}, 300, 160) == 192);
    CHECK(lowest_capacity({4, 1}, 10, 1) == 3);
    // Three params of 6 in 2 shards: one shard holds two, so 12, though the total over dp
    // is 9.
    CHECK(least_capacity(all_of({6, 6, 6}), {2, 1}, 0) == 12);
    CHECK(least_capacity(all_of({6, 6, 6}), {2, 1}, 13) == 13);
    CHECK(least_capacity(all_of({6, 6, 6}), {2, 8}, 0) == 16);
  }

  TEST_CASE("the search finds the capacity best-fit packs at") {
    // 6, 5, 4, 3 in 2 shards: 6 + 3 and 5 + 4, the total over dp: 9.
    const Fit fit = smallest_fit(all_of({6, 5, 4, 3}), {2, 1}, 0, true);
    CHECK(fit.capacity == 9);
    CHECK_FALSE(fit.filling.has_value());
  }

  TEST_CASE("filling bin by bin goes below best-fit's capacity") {
    // 5, 4, 3, 3, 3, 2 in 2 shards: best-fit cannot pack them in 10 (the 2 is left over)
    // and does in 11; filling bin by bin packs 5 + 3 + 2 and 4 + 3 + 3.
    const Items items = all_of({2, 3, 3, 3, 4, 5});
    CHECK(least_capacity(items, {2, 1}, 0) == 10);
    const Fit best_fit_only = smallest_fit(items, {2, 1}, 0, false);
    CHECK(best_fit_only.capacity == 11);
    CHECK_FALSE(best_fit_only.filling.has_value());
    const Fit filled = smallest_fit(items, {2, 1}, 0, true);
    CHECK(filled.capacity == 10);
    REQUIRE(filled.filling.has_value());
    std::vector<Size> fill(2, 0);
    const std::vector<Size> span{2, 3, 3, 3, 4, 5};
    const BinOf bin_of = bins_at(items, {2, 1}, filled);
    for (std::size_t q = 0; q < span.size(); ++q)
      fill[static_cast<std::size_t>(bin_of[q])] += span[q];
    CHECK(fill == std::vector<Size>{10, 10});
  }

  TEST_CASE("a bucket is searched once, wherever its spans repeat") {
    const std::vector<Size> span{6, 5, 4, 3, 6, 5, 4, 3, 6, 5};
    Capacities capacities(span, {2, 1});
    const Fit& first = capacities.smallest_fit(0, 4, 0, true);
    CHECK(first.capacity == 9);
    CHECK(&capacities.smallest_fit(4, 8, 0, true) == &first);
    CHECK(&capacities.smallest_fit(4, 8, 10, true) != &first);  // another lower bound
    CHECK(capacities.smallest_fit(4, 8, 10, true).capacity == 10);
    CHECK(&capacities.smallest_fit(6, 10, 0, true) != &first);  // 4, 3, 6, 5: other order
  }

  TEST_CASE("a run takes as many buckets as a greedy pass needs, and tries fewer") {
    const std::vector<Size> span{4, 4, 4, 4};
    const std::vector<Size> before = prefix(span);
    const Run run{span, before, 0, 4, {2, 1}, true};
    CHECK(greedy_count(run, 4) == 2);  // two params fill 2 shards of 4
    CHECK(greedy_count(run, 8) == 1);
    CHECK(counts_to_try(run, 10) == std::vector<std::size_t>{5, 6, 7, 8, 9, 10});
    CHECK(counts_to_try(run, 1) == std::vector<std::size_t>{1});
    const std::vector<Size> long_span(2001, 64);
    const std::vector<Size> long_before = prefix(long_span);
    const Run long_run{long_span, long_before, 0, 2001, {2, 64}, true};
    CHECK(long_run.long_run());
    CHECK_FALSE(long_run.tighten());
    CHECK(counts_to_try(long_run, 10) == std::vector<std::size_t>{5, 7, 9, 10});
  }

  TEST_CASE("a run is cut into buckets of about equal totals") {
    const std::vector<Size> span(6, 64);
    const std::vector<Size> before = prefix(span);
    const Run run{span, before, 0, 6, {2, 64}, true};
    Capacities capacities(span, run.shards);
    const std::optional<Buckets> three = cut(run, 3, 64, 1000, capacities);
    REQUIRE(three.has_value());
    REQUIRE(three->size() == 3);
    for (std::size_t b = 0; b < 3; ++b) {
      CHECK((*three)[b].from == 2 * b);
      CHECK((*three)[b].to == 2 * b + 2);
      CHECK((*three)[b].size == 128);
    }
    CHECK(size_of(*three) == 384);
    CHECK_FALSE(cut(run, 3, 64, 384, capacities).has_value());  // must come below `beat`
    // 4 buckets of 6 params: the goals fall at 1.5, 3 and 4.5 params; a cut goes past a
    // param only where that ends nearer the goal, so on the ties it stays at 1 and 4.
    const std::optional<Buckets> four = cut(run, 4, 64, 1000, capacities);
    REQUIRE(four.has_value());
    REQUIRE(four->size() == 4);
    CHECK((*four)[0].to == 1);
    CHECK((*four)[1].to == 3);
    CHECK((*four)[2].to == 4);
    CHECK((*four)[3].to == 6);
  }

  TEST_CASE("bucket_size sets the target shard; on a tie the most buckets win") {
    // 8 params of 64 at dp 2, bucket_size 256: shards of at least 128, so 4 params a
    // bucket; one bucket of 8 pads no more, and two are kept.
    const std::vector<Size> span(8, 64);
    const std::vector<Size> before = prefix(span);
    const Run run{span, before, 0, 8, {2, 64}, true};
    Capacities capacities(span, run.shards);
    const std::optional<Buckets> buckets = cut_run(run, 256, 512, capacities);
    REQUIRE(buckets.has_value());
    REQUIRE(buckets->size() == 2);
    CHECK(size_of(*buckets) == 512);
    CHECK_FALSE(cut_run(run, 256, 511, capacities).has_value());    // over the budget
    CHECK_FALSE(cut_run(run, 2048, 1000, capacities).has_value());  // 2 x 1024 > 1000
    const std::optional<Buckets> one = cut_run(run, std::nullopt, 512, capacities);
    REQUIRE(one.has_value());
    CHECK(one->size() == 1);
  }

  TEST_CASE("a cut moves where the pair of buckets gets smaller") {
    // 6, 6, 4 | 4, 2, 2 at dp 2: 2 x 10 + 2 x 4 = 28 (the 6s and a 4 need shards of 10).
    // Moving the cut one param left gives 6 | 6 and 4 + 2 | 4 + 2: 2 x 6 + 2 x 6 = 24.
    const std::vector<Size> span{6, 6, 4, 4, 2, 2};
    const std::vector<Size> before = prefix(span);
    const Run run{span, before, 0, 6, {2, 1}, true};
    Capacities capacities(span, run.shards);
    Buckets buckets{{0, 3, 0, capacities.smallest_fit(0, 3, 0, true), false},
                    {3, 6, 0, capacities.smallest_fit(3, 6, 0, true), false}};
    for (Bucket& b : buckets) b.size = 2 * b.fit.capacity;
    CHECK(size_of(buckets) == 28);
    refine_cuts(run, buckets, 0, capacities);
    CHECK(buckets[0].to == 2);
    CHECK(buckets[1].from == 2);
    CHECK(buckets[0].size == 12);
    CHECK(buckets[1].size == 12);
  }
}
