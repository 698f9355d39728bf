// The balanced packer's bins: items in best-fit-decreasing order, best-fit against a plain
// one-item-at-a-time scan of the bins, and bin-by-bin filling on cases worked out by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "layerwise/bins.hpp"
#include "layerwise/fill.hpp"

using namespace paramlayout::layerwise;

namespace {

/// Best-fit-decreasing as its definition reads: each item, largest first (ties in position
/// order), to the bin with the least room that fits it, the first on ties.
std::optional<Size> plain_best_fit(const std::vector<Size>& span, std::int64_t bins, Size capacity,
                                   BinOf& bin_of) {
  std::vector<std::size_t> order(span.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return span[a] > span[b]; });
  std::vector<Size> room(static_cast<std::size_t>(bins), capacity);
  bin_of.assign(span.size(), -1);
  for (const std::size_t q : order) {
    std::size_t best = room.size();
    for (std::size_t b = 0; b < room.size(); ++b) {
      if (room[b] >= span[q] && (best == room.size() || room[b] < room[best])) best = b;
    }
    if (best == room.size()) return std::nullopt;
    room[best] -= span[q];
    bin_of[q] = static_cast<std::int64_t>(best);
  }
  return capacity - *std::min_element(room.begin(), room.end());
}

/// What each bin holds, with `bin_of` from a packing of `span`.
std::vector<Size> bin_fills(const std::vector<Size>& span, const BinOf& bin_of, std::int64_t bins) {
  std::vector<Size> fill(static_cast<std::size_t>(bins), 0);
  for (std::size_t q = 0; q < span.size(); ++q)
    fill[static_cast<std::size_t>(bin_of[q])] += span[q];
  return fill;
}

}  // namespace

TEST_SUITE("layerwise") {
  TEST_CASE("items come largest first, ties in position order, in runs of one span") {
    const std::vector<Size> span{99, 5, 3, 5, 7, 3, 99};
    const Items items = by_decreasing_span(span, 1, 6);
    CHECK(items.from == 1);
    CHECK(items.positions == std::vector<std::size_t>{4, 1, 3, 2, 5});
    REQUIRE(items.runs.size() == 3);
    CHECK(items.runs[0].span == 7);
    CHECK(items.runs[1].span == 5);
    CHECK(items.runs[1].first == 1);
    CHECK(items.runs[1].end == 3);
    CHECK(items.runs[2].span == 3);
    CHECK(items.gcd == 1);
    CHECK(items.total() == 23);
    CHECK(items.largest() == 7);
    CHECK(by_decreasing_span(std::vector<Size>{64, 128, 192}, 0, 3).gcd == 64);
  }

  TEST_CASE("many distinct spans sort the same way") {
    std::mt19937_64 rng(7);
    for (const int kinds : {3, 16, 17, 200}) {  // sorted by runs up to 16, else compared
      std::vector<Size> span(300);
      for (Size& s : span) s = 64 * std::uniform_int_distribution<int>(1, kinds)(rng);
      const Items items = by_decreasing_span(span, 10, 290);
      std::vector<std::size_t> want(280);
      std::iota(want.begin(), want.end(), std::size_t{10});
      std::stable_sort(want.begin(), want.end(),
                       [&](std::size_t a, std::size_t b) { return span[a] > span[b]; });
      CHECK(items.positions == want);
      std::size_t covered = 0;
      for (const Items::Run& run : items.runs) {
        for (std::size_t i = run.first; i < run.end; ++i)
          CHECK(span[items.positions[i]] == run.span);
        covered += run.end - run.first;
      }
      CHECK(covered == 280);
      CHECK(items.gcd == 64);
    }
  }

  TEST_CASE("best-fit puts each item in the fullest bin it fits, by hand") {
    // 2 bins of 10: 6 to bin 0, 5 to bin 1, 4 to bin 0 (room 4, the fullest that fits),
    // 3 to bin 1: bin 0 holds 10.
    const std::vector<Size> span{3, 4, 5, 6};
    BinOf bin_of(4);
    CHECK(best_fit(by_decreasing_span(span, 0, 4), 2, 10, &bin_of) == 10);
    CHECK(bin_of == BinOf{1, 0, 1, 0});
    CHECK_FALSE(best_fit(by_decreasing_span(span, 0, 4), 2, 8).has_value());
  }

  TEST_CASE("best-fit in groups of equal bins places every item where the plain scan does") {
    std::mt19937_64 rng(11);
    for (int round = 0; round < 400; ++round) {
      const std::int64_t bins = std::uniform_int_distribution<std::int64_t>(1, 20)(rng);
      const int kinds = std::uniform_int_distribution<int>(1, 5)(rng);
      std::vector<Size> span(std::uniform_int_distribution<std::size_t>(1, 120)(rng));
      for (Size& s : span) s = std::uniform_int_distribution<int>(1, kinds)(rng) * 64 + 64;
      const Size total = std::accumulate(span.begin(), span.end(), Size{0});
      const Size capacity = total / bins + std::uniform_int_distribution<Size>(0, 400)(rng);
      BinOf want;
      const std::optional<Size> expected = plain_best_fit(span, bins, capacity, want);
      BinOf got(span.size());
      CAPTURE(round);
      REQUIRE(best_fit(by_decreasing_span(span, 0, span.size()), bins, capacity, &got) == expected);
      if (expected) CHECK(got == want);
    }
  }

  TEST_CASE("filling bins one at a time packs where best-fit cannot") {
    // 2 bins of 10 and items 5, 4, 3, 3, 3, 2 (20 in all). Best-fit: 5 and 4 share bin 0,
    // the 3s go to bin 1, and the 2 finds no room. Filling: bin 0 takes the 5 and fills
    // its 5 left best with 3 + 2; bin 1 takes 4, 3, 3.
    const std::vector<Size> span{2, 3, 3, 3, 4, 5};
    const Items items = by_decreasing_span(span, 0, span.size());
    CHECK_FALSE(best_fit(items, 2, 10).has_value());
    REQUIRE(can_fill(items, 2));
    Filling filling;
    CHECK(fill_bins(items, 2, 10, filling) == 10);
    const BinOf bin_of = bins_of(items, filling);
    CHECK(bin_fills(span, bin_of, 2) == std::vector<Size>{10, 10});
    CHECK(bin_of[5] == 0);  // the 5 opens bin 0
    CHECK(bin_of[0] == 0);  // with the 2
    CHECK_FALSE(fill_bins(items, 2, 9, filling).has_value());
  }

  TEST_CASE("a bin's filling repeats while its items last") {
    // 8 bins of 12, items 8 x 6 and 16 x 3. The first bin takes a 6 and fills its 6 left
    // with the largest first: another 6. That choice holds for 4 bins (8 sixes); the other
    // 4 take four 3s each: two searches in all.
    std::vector<Size> span(8, 6);
    span.insert(span.end(), 16, 3);
    const Items items = by_decreasing_span(span, 0, span.size());
    Filling filling;
    CHECK(fill_bins(items, 8, 12, filling) == 12);
    REQUIRE(filling.size() == 2);
    CHECK(filling[0].repeat == 4);
    CHECK(filling[0].take[0] == 2);
    CHECK(filling[0].take[1] == 0);
    CHECK(filling[1].repeat == 4);
    CHECK(filling[1].take[0] == 0);
    CHECK(filling[1].take[1] == 4);
    CHECK(bin_fills(span, bins_of(items, filling), 8) == std::vector<Size>(8, 12));
  }

  TEST_CASE("filling applies to few bins and few sizes") {
    std::vector<Size> span(13);
    std::iota(span.begin(), span.end(), Size{1});
    CHECK_FALSE(can_fill(by_decreasing_span(span, 0, 13), 8));  // 13 sizes
    CHECK(can_fill(by_decreasing_span(span, 0, 12), 64));
    CHECK_FALSE(can_fill(by_decreasing_span(span, 0, 12), 65));
  }
}
