// Megatron-LM's packer: its shard queues against plain scans of every shard, and its rules
// on small buffers worked out by hand (the layerwise-oracle and reference suites hold it to
// a transliteration of the rules and to Megatron-LM's own layouts).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "layerwise/megatron.hpp"
#include "layerwise/shard_queues.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using namespace paramlayout::layerwise;
using paramlayout::test::expect_ok;

namespace {

Param matrix(std::string_view name, std::int64_t rows, std::int64_t cols) {
  Param p;
  p.name = name;
  p.shape = {rows, cols};
  p.numel = rows * cols;
  return p;
}

}  // namespace

TEST_SUITE("layerwise") {
  TEST_CASE("the least-loaded shard with room is the one a scan finds") {
    for (const std::int64_t dp : {1, 7, 64, 65, 300}) {  // scanned up to 64, a treap beyond
      CAPTURE(dp);
      std::mt19937_64 rng(static_cast<std::uint64_t>(dp));
      LeastLoadedShard queue(dp);
      std::vector<Wide> load(static_cast<std::size_t>(dp), 0);
      std::vector<Wide> fill(static_cast<std::size_t>(dp), 0);
      for (int step = 0; step < 3000; ++step) {
        const Wide limit = std::uniform_int_distribution<int>(0, 100)(rng);
        std::int32_t want = -1;  // smallest (load, id) with fill <= limit
        for (std::int32_t s = 0; s < dp; ++s) {
          if (fill[s] <= limit && (want < 0 || load[s] < load[want])) want = s;
        }
        REQUIRE(queue.find(limit) == want);
        const auto s =
            std::uniform_int_distribution<std::int32_t>(0, static_cast<std::int32_t>(dp - 1))(rng);
        if (step % 5 == 4) {
          fill[s] = 0;
          queue.set_fill(s, 0);
        } else {
          load[s] += std::uniform_int_distribution<int>(0, 3)(rng);  // ties are common
          fill[s] = std::uniform_int_distribution<int>(0, 100)(rng);
          queue.set(s, load[s], fill[s]);
        }
        CHECK(queue.load(s) == load[s]);
      }
    }
  }

  TEST_CASE("the emptiest shard is the one a scan finds") {
    for (const std::int64_t dp : {1, 5, 64, 100}) {
      CAPTURE(dp);
      std::mt19937_64 rng(static_cast<std::uint64_t>(dp));
      EmptiestShard queue(dp);
      std::vector<Wide> cursor(static_cast<std::size_t>(dp), 0);
      for (int step = 0; step < 2000; ++step) {
        const auto s =
            std::uniform_int_distribution<std::int32_t>(0, static_cast<std::int32_t>(dp - 1))(rng);
        cursor[s] = std::uniform_int_distribution<int>(0, 20)(rng);
        queue.set(s, cursor[s]);
        const auto want = std::min_element(cursor.begin(), cursor.end()) - cursor.begin();
        REQUIRE(queue.find() == want);
        CHECK(queue.cursor(s) == cursor[s]);
      }
    }
  }

  TEST_CASE("the fill estimate puts each param on the least-filled shard, aligned") {
    for (const std::int64_t dp : {1, 3, 8}) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(dp));
      FillEstimate estimate(dp);
      std::vector<Wide> fill(static_cast<std::size_t>(dp), 0);
      for (int step = 0; step < 500; ++step) {
        if (step % 50 == 49) {
          estimate.reset();
          std::fill(fill.begin(), fill.end(), 0);
        }
        const std::int64_t numel = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
        estimate.place(numel);
        Wide& least = *std::min_element(fill.begin(), fill.end());
        least = align_param_start(least) + numel;
        CHECK(estimate.min() == *std::min_element(fill.begin(), fill.end()));
        CHECK(estimate.max() == *std::max_element(fill.begin(), fill.end()));
      }
    }
  }

  TEST_CASE("Megatron-LM's packing of a small buffer, worked out by hand") {
    // dp 2, no bucket size: one chunk of 13312 elements. Costs: a 64^3 = 262144, b 128 x
    // 64^2 = 524288, c 32^3 = 32768. The cap is 1.3 x 13312 / 2 = 8652.8. Costliest first:
    // b (8192) to shard 0, a (4096) to shard 1 (the least loaded), c (1024) to shard 1
    // (shard 0 has no room: 8192 + 1024 > 8652). Shards of 8192, b's.
    Manifest m;
    m.source = "m.json";
    m.params = {matrix("a", 64, 64), matrix("b", 128, 64), matrix("c", 32, 32)};
    PlanOptions options;
    options.strategy = Strategy::layerwise;
    options.dp = options.expert_dp = 2;
    BufferGroup group;
    group.num_shards = 2;
    group.params = {0, 1, 2};
    group.indices = {0, 1, 2};
    const BufferJob job{m, group, options};
    const std::vector<Cost> cost = expect_ok(newton_schulz_costs(job));
    const Packing packing = expect_ok(pack_megatron(job, cost));
    REQUIRE(packing.buckets.size() == 1);
    CHECK(packing.buckets[0].shard_size == 8192);
    CHECK(packing.buckets[0].numel_unpadded == 13312);
    REQUIRE(packing.slots.size() == 3);
    // Layout order: shard 0 (b), then shard 1 in the order assigned (a, then c).
    CHECK(packing.slots[0].param == 1);
    CHECK(packing.slots[0].shard == 0);
    CHECK(packing.slots[1].param == 0);
    CHECK(packing.slots[1].shard == 1);
    CHECK(packing.slots[2].param == 2);
    CHECK(packing.slots[2].shard == 1);
    CHECK(packing.size(2) == 16384);
  }

  TEST_CASE("a shard's costs beyond 127 bits are an error naming the buffer") {
    // Two matrices of cost 2^126 each (2^42 x 2^42 x 2^42) on one shard: dp 1. Only the
    // costs matter here: their numel is left at 1.
    Manifest m;
    m.source = "m.json";
    const std::int64_t side = std::int64_t{1} << 42;
    for (const std::string_view name : {"a", "b"}) {
      Param p;
      p.name = name;
      p.shape = {side, side};
      m.params.push_back(p);
    }
    PlanOptions options;
    options.strategy = Strategy::layerwise;
    BufferGroup group;
    group.key.layerwise = true;
    group.params = {0, 1};
    group.indices = {0, 1};
    const BufferJob job{m, group, options};
    const std::vector<Cost> cost = expect_ok(newton_schulz_costs(job));
    const Result<Packing> packing = pack_megatron(job, cost);
    REQUIRE_FALSE(packing.ok());
    CHECK(packing.error().message ==
          "m.json: the Newton-Schulz costs of buffer float32/float32 layerwise add up to more "
          "than 127 bits");
  }
}
