// Each strategy on small manifests whose layouts were worked out by hand from its rules
// (docs/strategies.md).
#include <doctest/doctest.h>

#include <map>
#include <tuple>

#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

// Names are string literals: static text outlives every Layout here.
Param matrix(std::string_view name, std::int64_t rows, std::int64_t cols) {
  Param p;
  p.name = name;
  p.shape = {rows, cols};
  p.numel = rows * cols;
  p.dtype = DType::bfloat16;
  return p;
}

Param vector(std::string_view name, std::int64_t n) {
  Param p;
  p.name = name;
  p.shape = {n};
  p.numel = n;
  p.dtype = DType::bfloat16;
  return p;
}

Manifest manifest_of(std::vector<Param> params) {
  Manifest m;
  m.source = "test";
  m.params = std::move(params);
  return m;
}

PlanOptions options(Strategy strategy, std::int64_t dp, std::optional<std::int64_t> bucket) {
  PlanOptions o;
  o.strategy = strategy;
  o.dp = dp;
  o.expert_dp = dp;
  o.bucket_size = bucket;
  return o;
}

using Placement = std::tuple<std::int64_t, std::int64_t, std::int64_t>;  // start, end, bucket

std::map<std::string, Placement> placements(const BufferLayout& buffer) {
  std::map<std::string, Placement> out;
  for (const ParamSlot& p : buffer.params) out[std::string(p.name)] = {p.start, p.end, p.bucket};
  return out;
}

}  // namespace

TEST_SUITE("strategies") {
  TEST_CASE("unpadded packs params back to back in backprop order") {
    const Layout l =
        expect_ok(plan(manifest_of({vector("a", 10), vector("b", 20), vector("c", 30)}),
                       options(Strategy::unpadded, 4, 40)));
    REQUIRE(l.buffers.size() == 1);
    const BufferLayout& b = l.buffers[0];
    CHECK_FALSE(b.num_shards.has_value());
    CHECK(placements(b) == std::map<std::string, Placement>{
                               {"c", {0, 30, 0}}, {"b", {30, 50, 0}}, {"a", {50, 60, 1}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 50, 50}, {50, 60, 10}});
    CHECK(b.numel == 60);
    CHECK(b.params[0].index == 2);  // c is the third bfloat16 param
  }

  TEST_CASE("sequential-dp aligns starts to 64 and pads bucket ends to lcm(dp, 128)") {
    const Layout l =
        expect_ok(plan(manifest_of({vector("c", 5), vector("a", 100), vector("b", 10)}),
                       options(Strategy::sequential_dp, 2, 50)));
    const BufferLayout& b = l.buffers[0];
    CHECK(b.num_shards == 2);
    // b [0,10); a at align(10) = 64, ends 164 >= 50: bucket [0, pad(164, 128) = 256).
    // c starts the next bucket at 256 and closes at pad(261, 128) = 384.
    CHECK(placements(b) == std::map<std::string, Placement>{
                               {"b", {0, 10, 0}}, {"a", {64, 164, 0}}, {"c", {256, 261, 1}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 256, 164}, {256, 384, 5}});
    CHECK(b.numel == 384);
    CHECK(b.numel_unpadded == 169);
  }

  TEST_CASE("sequential-dp gives a shared embedding its own bucket") {
    Param e = vector("e", 300);
    e.shared_embedding = true;
    const Layout l = expect_ok(plan(manifest_of({e, vector("x", 10), vector("y", 20)}),
                                    options(Strategy::sequential_dp, 2, std::nullopt)));
    const BufferLayout& b = l.buffers[0];
    // y [0,20), x [64,74); e closes the open bucket at align(74) = 128, then sits alone.
    CHECK(placements(b) == std::map<std::string, Placement>{
                               {"y", {0, 20, 0}}, {"x", {64, 74, 0}}, {"e", {128, 428, 1}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 128, 128}, {128, 512, 300}});
  }

  TEST_CASE("buffers follow the first appearance of their key; index counts logical dtype") {
    Param fp8 = matrix("q", 4, 4);
    fp8.storage = Storage::fp8;
    Param expert = matrix("x", 4, 4);
    expert.expert_parallel = true;
    Param f32 = vector("n", 4);
    f32.dtype = DType::float32;
    PlanOptions o = options(Strategy::sequential_dp, 4, std::nullopt);
    o.expert_dp = 2;
    const Layout l =
        expect_ok(plan(manifest_of({matrix("w", 4, 4), fp8, expert, f32, matrix("v", 4, 4)}), o));
    REQUIRE(l.buffers.size() == 4);
    CHECK(l.buffers[0].key == BufferKey{DType::bfloat16, DType::bfloat16, false, false});
    CHECK(l.buffers[1].key == BufferKey{DType::uint8, DType::bfloat16, false, false});
    CHECK(l.buffers[2].key == BufferKey{DType::bfloat16, DType::bfloat16, true, false});
    CHECK(l.buffers[3].key == BufferKey{DType::float32, DType::float32, false, false});
    CHECK(l.buffers[2].num_shards == 2);
    // w=0, q=1 (fp8 storage shares the bfloat16 counter), v=2.
    CHECK(l.buffers[0].params[0].name == "v");
    CHECK(l.buffers[0].params[0].index == 2);
    CHECK(l.buffers[0].params[1].index == 0);
    CHECK(l.buffers[1].params[0].index == 1);
    CHECK(l.buffers[2].params[0].index == 0);
  }

  TEST_CASE("grad_reduce_in_fp32 makes every grad buffer float32") {
    PlanOptions o = options(Strategy::sequential_dp, 2, std::nullopt);
    o.grad_reduce_in_fp32 = true;
    const Layout l = expect_ok(plan(manifest_of({matrix("w", 4, 4)}), o));
    CHECK(l.buffers[0].key == BufferKey{DType::bfloat16, DType::float32, false, false});
  }

  TEST_CASE("layerwise only takes 2-dim Muon params that are not embeddings") {
    Param emb = matrix("emb", 8, 4);
    emb.embedding_or_output = true;
    Param no_muon = matrix("nm", 8, 4);
    no_muon.use_muon = false;
    Param cube = matrix("cube", 2, 2);
    cube.shape = {2, 2, 2};
    cube.numel = 8;
    const Layout l =
        expect_ok(plan(manifest_of({emb, no_muon, cube, vector("bias", 8), matrix("w", 8, 4)}),
                       options(Strategy::layerwise, 2, std::nullopt)));
    REQUIRE(l.buffers.size() == 2);
    CHECK(l.buffers[0].strategy == Strategy::sequential_dp);
    CHECK(l.buffers[0].params.size() == 4);
    CHECK(l.buffers[1].key.layerwise);
    CHECK(l.buffers[1].strategy == Strategy::layerwise);
    CHECK(l.buffers[1].params[0].name == "w");
  }

  TEST_CASE("layerwise packs whole matrices into shards by cost, then pads shards") {
    // Four 8x8 matrices, dp 2: cap = 256 / 2 * 1.3 = 166.4. Equal costs keep backprop order
    // m3, m2, m1, m0; each goes to the least-loaded shard with room: m3->0, m2->1, m1->0
    // (tie on load, lowest shard), m0->1 (shard 0 would reach 192 > 166.4).
    const Layout l = expect_ok(plan(manifest_of({matrix("m0", 8, 8), matrix("m1", 8, 8),
                                                 matrix("m2", 8, 8), matrix("m3", 8, 8)}),
                                    options(Strategy::layerwise, 2, std::nullopt)));
    const BufferLayout& b = l.buffers[0];
    CHECK(placements(b) == std::map<std::string, Placement>{{"m3", {0, 64, 0}},
                                                            {"m1", {64, 128, 0}},
                                                            {"m2", {128, 192, 0}},
                                                            {"m0", {192, 256, 0}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 256, 256}});
  }

  TEST_CASE("layerwise: a param larger than the cap goes to the emptiest shard") {
    // cap = 320 / 2 * 1.3 = 208 < 256: A fits no shard, so it takes the emptiest (shard 0);
    // b then fits shard 1. Shards are pad(256, 64) = 256 wide.
    const Layout l = expect_ok(plan(manifest_of({matrix("A", 16, 16), matrix("b", 8, 8)}),
                                    options(Strategy::layerwise, 2, std::nullopt)));
    const BufferLayout& b = l.buffers[0];
    CHECK(placements(b) ==
          std::map<std::string, Placement>{{"A", {0, 256, 0}}, {"b", {256, 320, 0}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 512, 320}});
  }

  TEST_CASE("layerwise closes a chunk once it reaches the threshold and cannot absorb") {
    // dp 2, bucket size 64, four 8x8 matrices: threshold = max(64, trunc(2 * 64 * 0.9)) = 115.
    // After m3, m2 the chunk holds 128 >= 115 and m1 would grow the shards: emit [m3, m2].
    const Layout l = expect_ok(plan(manifest_of({matrix("m0", 8, 8), matrix("m1", 8, 8),
                                                 matrix("m2", 8, 8), matrix("m3", 8, 8)}),
                                    options(Strategy::layerwise, 2, 64)));
    const BufferLayout& b = l.buffers[0];
    CHECK(placements(b) == std::map<std::string, Placement>{{"m3", {0, 64, 0}},
                                                            {"m2", {64, 128, 0}},
                                                            {"m1", {128, 192, 1}},
                                                            {"m0", {192, 256, 1}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 128, 128}, {128, 256, 128}});
  }

  TEST_CASE("layerwise: a shared embedding sits alone in shard 0 of its own bucket") {
    Param e = matrix("e", 10, 10);
    e.shared_embedding = true;
    const Layout l = expect_ok(
        plan(manifest_of({e, matrix("w", 8, 8)}), options(Strategy::layerwise, 4, std::nullopt)));
    const BufferLayout& b = l.buffers[0];
    // shard divisor(4) = lcm(64, 32) = 64. w: cap = 64/4*1.3 = 20.8 < 64, so the emptiest
    // shard 0; shards pad(64, 64) = 64 wide -> bucket [0, 256). e: shards pad(100, 64) = 128
    // wide -> bucket [256, 768) with e in shard 0.
    CHECK(placements(b) ==
          std::map<std::string, Placement>{{"w", {0, 64, 0}}, {"e", {256, 356, 1}}});
    CHECK(b.buckets == std::vector<BucketRange>{{0, 256, 64}, {256, 768, 100}});
  }

  TEST_CASE("offsets past 2^63 - 1 are an error, not a wrapped value") {
    const std::int64_t half = std::int64_t{1} << 62;
    for (Strategy s : {Strategy::unpadded, Strategy::sequential_dp, Strategy::layerwise}) {
      Result<Layout> l = plan(manifest_of({matrix("a", half, 1), matrix("b", half, 1)}),
                              options(s, 2, std::nullopt));
      REQUIRE_FALSE(l.ok());
      CHECK(l.error().message.find("offsets must fit in 64 bits") != std::string::npos);
    }
  }

  TEST_CASE("a Newton-Schulz cost beyond 127 bits is an error") {
    // m' = 2^40 * 2^60 = 2^100, cost = 2^100 * (2^20)^2 = 2^140.
    Param p = matrix("w", std::int64_t{1} << 40, 1 << 20);
    p.gtp_remat_size = std::int64_t{1} << 60;
    Result<Layout> l = plan(manifest_of({p}), options(Strategy::layerwise, 2, std::nullopt));
    REQUIRE_FALSE(l.ok());
    CHECK(l.error().message ==
          "test: param \"w\": its Newton-Schulz cost (shape and "
          "gtp_remat_size) exceeds 127 bits");
  }
}
