// The layerwise module's ground: Newton-Schulz costs (worked out by hand), each rank's cost
// in a layout, and the packing both packers make, written out as offsets.
#include <doctest/doctest.h>

#include <vector>

#include "layerwise/costs.hpp"
#include "layerwise/packing.hpp"
#include "paramlayout/costs.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

Param param(std::string_view name, std::vector<std::int64_t> shape) {
  Param p;
  p.name = name;
  p.shape = std::move(shape);
  p.numel = 1;
  for (const std::int64_t d : p.shape) p.numel *= d;
  return p;
}

/// One layerwise buffer of `params` at `dp`, and a job for it.
struct OneBuffer {
  Manifest manifest;
  PlanOptions options;
  BufferGroup group;

  OneBuffer(std::vector<Param> params, std::int64_t dp) {
    manifest.source = "m.json";
    manifest.params = std::move(params);
    options.strategy = Strategy::layerwise;
    options.dp = options.expert_dp = dp;
    group.num_shards = dp;
    for (std::size_t i = 0; i < manifest.params.size(); ++i) {
      group.params.push_back(i);
      group.indices.push_back(static_cast<std::int64_t>(i));
    }
  }
  layerwise::BufferJob job() const { return {manifest, group, options}; }
};

}  // namespace

TEST_SUITE("layerwise") {
  TEST_CASE("a matrix costs its larger dim times the smaller one squared") {
    CHECK(newton_schulz_cost(param("a", {128, 64})) == Cost{128 * 64 * 64});
    CHECK(newton_schulz_cost(param("b", {64, 128})) == Cost{128 * 64 * 64});
    Param gtp = param("c", {64, 128});
    gtp.gtp_remat_size = 4;  // dim 0 becomes 256: 256 x 128^2
    CHECK(newton_schulz_cost(gtp) == Cost{256 * 128 * 128});
    CHECK(newton_schulz_cost(param("v", {4096})) == Cost{4096});
    CHECK(newton_schulz_cost(param("t", {4, 5, 6})) == Cost{120});
    // 2^40 x 2^60 rows of 2^20: 2^100 x 2^40 = 2^140, beyond 127 bits.
    Param huge = param("h", {std::int64_t{1} << 40, std::int64_t{1} << 20});
    huge.gtp_remat_size = std::int64_t{1} << 60;
    CHECK_FALSE(newton_schulz_cost(huge).has_value());
    // 2^63 - 1 rows is fine alone: (2^63 - 1) x 1 x 1.
    CHECK(newton_schulz_cost(param("tall", {INT64_MAX, 1})) == Cost{INT64_MAX});
  }

  TEST_CASE("a buffer's costs name the param that does not fit") {
    Param huge = param("huge", {std::int64_t{1} << 40, std::int64_t{1} << 20});
    huge.gtp_remat_size = std::int64_t{1} << 60;
    const OneBuffer b({param("ok", {8, 8}), huge}, 2);
    const Result<std::vector<Cost>> costs = layerwise::newton_schulz_costs(b.job());
    REQUIRE_FALSE(costs.ok());
    CHECK(costs.error().message ==
          "m.json: param \"huge\": its Newton-Schulz cost (shape and "
          "gtp_remat_size) exceeds 127 bits");
    const OneBuffer fine({param("a", {8, 4}), param("v", {10})}, 2);
    CHECK(expect_ok(layerwise::newton_schulz_costs(fine.job())) == std::vector<Cost>{128, 10});
  }

  TEST_CASE("each rank carries the params whose first element its shard holds") {
    // dp 2: bucket 0 is [0, 256) (shards of 128), bucket 1 [256, 768) (shards of 256).
    BufferLayout b;
    b.strategy = Strategy::layerwise;
    b.num_shards = 2;
    b.buckets = {{0, 256, 0}, {256, 768, 0}};
    b.params = {{"a", 0, 100, 0, 0},   {"b", 128, 200, 0, 1}, {"c", 256, 300, 1, 2},
                {"d", 512, 600, 1, 3}, {"e", 700, 710, 1, 4}, {"f", 0, 1, 7, 5}};
    const std::vector<Cost> cost{1, 10, 100, 1000, 10000, 100000};  // f: no such bucket
    CHECK(rank_costs(b, cost) == std::vector<Cost>{101, 11010});
    // Sums saturate at 2^127 - 1.
    const std::vector<Cost> big{kMaxCost - 1, 0, 5, 0, 0, 0};
    CHECK(rank_costs(b, big) == std::vector<Cost>{kMaxCost, 0});
  }

  TEST_CASE("costs over ranks add up, saturating") {
    std::vector<Cost> total{1, 2};
    layerwise::add_rank_costs(total, {10, 20, 30});
    CHECK(total == std::vector<Cost>{11, 22, 30});
    layerwise::add_rank_costs(total, {kMaxCost, 0, 0});
    CHECK(total == std::vector<Cost>{kMaxCost, 22, 30});
    CHECK(layerwise::heaviest(total) == kMaxCost);
    CHECK(layerwise::heaviest({}) == 0);
  }

  TEST_CASE("a packing is written shard by shard, each param on a multiple of 64") {
    // dp 2, shard divisor lcm(64, lcm(2, 128) / 2) = 64.
    const OneBuffer b({param("p0", {100}), param("p1", {50}), param("p2", {60}), param("p3", {10}),
                       param("e", {100})},
                      2);
    layerwise::Packing packing;
    packing.add(2, 1);  // shard 1 first: shards are put in order, params kept in order
    packing.add(0, 0);
    packing.add(1, 0);
    packing.close_bucket(256, 210);
    packing.add(3, 1);
    packing.close_bucket(64, 10);
    packing.add(4, 0);
    packing.close_bucket(layerwise::shared_embedding_shard(b.job(), 4), 100);
    CHECK(packing.size(2) == 2 * 256 + 2 * 64 + 2 * 128);
    REQUIRE(packing.slots.size() == 5);
    CHECK(packing.slots[0].param == 0);
    CHECK(packing.slots[1].param == 1);
    CHECK(packing.slots[2].param == 2);

    BufferLayout out;
    layerwise::BufferBuilder builder(b.job(), out);
    layerwise::write(b.job(), packing, builder);
    REQUIRE(builder.finish().ok());
    // Bucket 0 [0, 512): p0 [0, 100), p1 at align(100) = 128, p2 at 256 (shard 1).
    // Bucket 1 [512, 640): p3 at 576 (shard 1). Bucket 2 [640, 896): e at 640 (shard 0).
    CHECK(out.params == std::vector<ParamSlot>{{"p0", 0, 100, 0, 0},
                                               {"p1", 128, 178, 0, 1},
                                               {"p2", 256, 316, 0, 2},
                                               {"p3", 576, 586, 1, 3},
                                               {"e", 640, 740, 2, 4}});
    CHECK(out.buckets == std::vector<BucketRange>{{0, 512, 210}, {512, 640, 10}, {640, 896, 100}});
    CHECK(out.numel == 896);
    CHECK(out.numel_unpadded == 320);
    CHECK(layerwise::slot_costs(packing, {1, 2, 3, 4, 5}) == std::vector<Cost>{1, 2, 3, 4, 5});
  }
}
