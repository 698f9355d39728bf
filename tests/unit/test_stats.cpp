// stats: the one padding figure, traffic per step worked out by hand, a layout's recorded
// stats held to it, the advice for plans far off their alternatives, and the picture's
// colour groups.
#include <doctest/doctest.h>

#include <string>

#include "paramlayout/alternatives.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/diff.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/plan.hpp"
#include "paramlayout/stats.hpp"
#include "render/palette.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

Manifest manifest_of(const std::string& params) {
  return expect_ok(parse_manifest(
      R"({"schema": "paramlayout.manifest/v1", "model": "m", "params": [)" + params + "]}",
      "m.json"));
}

PlanOptions options(Strategy strategy, std::int64_t dp, std::optional<std::int64_t> bucket) {
  PlanOptions o;
  o.strategy = strategy;
  o.dp = o.expert_dp = dp;
  o.bucket_size = bucket;
  return o;
}

// A [128, 64] and a [64, 64] bf16 matrix: layerwise at dp 2, each alone in a shard of 8192.
const char* const kTwoMatrices = R"({"name": "a", "shape": [128, 64], "dtype": "bfloat16"},
                                    {"name": "b", "shape": [64, 64], "dtype": "bfloat16"})";

}  // namespace

TEST_SUITE("stats") {
  TEST_CASE("padding is the share of the buffers that holds no param") {
    CHECK(padding_share_percent(0, 0) == 0.0);
    CHECK(padding_share_percent(4096, 12288) == doctest::Approx(25.0));
    CHECK(padding_share_percent(1, 0) == doctest::Approx(100.0));
    const Manifest m = manifest_of(kTwoMatrices);
    const Layout l = expect_ok(plan(m, options(Strategy::layerwise, 2, 1 << 20)));
    const LayoutStats s = expect_ok(layout_stats(l, m));
    CHECK(s.padding_percent() == doctest::Approx(25.0));  // 4096 of 16384
    CHECK(s.floor_percent() == doctest::Approx(25.0));    // the floor is 2 x 8192
    CHECK(s.buffers[0].padding_percent() == doctest::Approx(25.0));
    CHECK(s.buffers[0].largest_param == "a");
    CHECK(s.buffers[0].largest_param_elements == 8192);
  }

  TEST_CASE("traffic of a sharded buffer: a reduce-scatter and an all-gather per bucket") {
    const Manifest m = manifest_of(kTwoMatrices);
    PlanOptions o = options(Strategy::layerwise, 2, 1 << 20);
    o.grad_reduce_in_fp32 = true;
    const LayoutStats s = expect_ok(layout_stats(expect_ok(plan(m, o)), m));
    const BufferTraffic& t = s.buffers[0].traffic;
    CHECK(t.ranks == 2);
    CHECK(t.buckets == 1);
    CHECK(t.smallest_bucket == 16384);
    CHECK(t.largest_bucket == 16384);
    CHECK(t.reduce_scatter_bytes == 16384 * 4);  // float32 grads
    CHECK(t.all_gather_bytes == 16384 * 2);      // bfloat16 params
    CHECK(t.all_reduce_bytes == 0);
    // A ring over 2 ranks sends half of each collective; a quarter of the buffer is padding.
    CHECK(t.sent_bytes == (65536 + 32768) / 2);
    CHECK(t.padding_sent_bytes == 49152 / 4);
    CHECK(s.traffic.sent_bytes == t.sent_bytes);
    CHECK(s.traffic.padding_percent() == doctest::Approx(25.0));
    // 49152 bytes over a 100 Gb/s link.
    CHECK(s.traffic.estimated_seconds(100) == doctest::Approx(49152.0 * 8 / 1e11));
  }

  TEST_CASE("traffic of unpadded and expert buffers, and of buckets of several sizes") {
    // Unpadded over dp 4: each bucket all-reduced, 2 x 3/4 of it sent.
    const Manifest dense = manifest_of(kTwoMatrices);
    const LayoutStats u = expect_ok(
        layout_stats(expect_ok(plan(dense, options(Strategy::unpadded, 4, 4096))), dense));
    CHECK(u.buffers[0].traffic.ranks == 4);
    CHECK(u.buffers[0].traffic.buckets == 2);  // a (8192) alone, then b (4096)
    CHECK(u.buffers[0].traffic.smallest_bucket == 4096);
    CHECK(u.buffers[0].traffic.largest_bucket == 8192);
    CHECK(u.traffic.all_reduce_bytes == 12288 * 2);
    CHECK(u.traffic.sent_bytes == 2 * 3 * 12288 * 2 / 4);
    // An expert buffer over expert dp 2 beside a dense one over dp 8 (sequential-dp).
    const Manifest moe = manifest_of(R"({"name": "w", "shape": [1024], "dtype": "float32"},
        {"name": "e", "shape": [1024], "dtype": "float32", "expert_parallel": true})");
    PlanOptions o = options(Strategy::sequential_dp, 8, std::nullopt);
    o.expert_dp = 2;
    const LayoutStats s = expect_ok(layout_stats(expect_ok(plan(moe, o)), moe));
    REQUIRE(s.buffers.size() == 2);
    CHECK(s.buffers[0].traffic.ranks == 8);
    CHECK(s.buffers[1].traffic.ranks == 2);
    // 1024 elements pad to lcm(8, 128) and lcm(2, 128): 1024 both; 4096 bytes each way.
    CHECK(s.buffers[0].traffic.sent_bytes == 2 * 4096 * 7 / 8);
    CHECK(s.buffers[1].traffic.sent_bytes == 2 * 4096 / 2);
    CHECK(s.traffic.padding_sent_bytes == 0);
  }

  TEST_CASE("a layout's recorded stats are held to the layout") {
    const Manifest m = manifest_of(kTwoMatrices);
    const Layout planned = expect_ok(plan(m, options(Strategy::layerwise, 2, 1 << 20)));
    const std::string stats = stats_to_json(expect_ok(layout_stats(planned, m)));
    Layout l = expect_ok(parse_layout(write_layout_json(planned, stats), "l.json"));
    REQUIRE(l.recorded_stats);
    CHECK(check_recorded_stats(l, m).empty());
    // Rounded as written (4 decimals) is fine; a changed figure is not.
    l.recorded_stats = R"({"padding_percent": 25.00004, "padding": 4097, "floor_padding": "x"})";
    const std::vector<Violation> v = check_recorded_stats(l, m);
    REQUIRE(v.size() == 2);
    CHECK(v[0].message().find("/stats/padding is 4097, the layout gives 4096") == 0);
    CHECK(v[1].message() == "/stats/floor_padding is \"x\", the layout gives 4096");
    l.recorded_stats = R"({"traffic_per_step": {"buffers": []}})";
    CHECK(check_recorded_stats(l, m).at(0).message().find(
              "/stats/traffic_per_step/buffers has 0 entries, the layout gives 1") == 0);
    l.recorded_stats.reset();
    CHECK(check_recorded_stats(l, m).empty());
  }

  TEST_CASE("advice names the matrix that forces the padding and a plan that pads less") {
    // 4 matrices of 64 x 64 and one of 64 x 1024 at dp 16, one bucket: each shard holds the
    // big one's 65536 elements, 16 x 65536 in all for 81920 of params.
    std::string params;
    for (int i = 0; i < 4; ++i) {
      params += R"({"name": "layers.)" + std::to_string(i) +
                R"(.w", "shape": [64, 64], "dtype": "bfloat16"}, )";
    }
    params += R"({"name": "layers.4.big", "shape": [1024, 64], "dtype": "bfloat16"})";
    const Manifest m = manifest_of(params);
    const Layout l = expect_ok(plan(m, options(Strategy::layerwise, 16, std::nullopt)));
    const LayoutStats s = expect_ok(layout_stats(l, m));
    CHECK(s.padding_percent() > 90);
    const std::optional<PaddingAdvice> advice = padding_advice(m, l, s);
    REQUIRE(advice);
    CHECK(advice->largest_param == "layers.4.big");
    CHECK(advice->largest_param_elements == 65536);
    CHECK(advice->shards == 16);
    CHECK(advice->shards_without_forced_padding == 1);  // 81920 / 65536
    REQUIRE(advice->sequential_dp);
    CHECK(advice->sequential_dp->footprint.bytes_per_rank.total() < s.bytes_per_rank.total());
    // At dp 1 nothing pads: no advice.
    const Layout one = expect_ok(plan(m, options(Strategy::layerwise, 1, std::nullopt)));
    CHECK_FALSE(padding_advice(m, one, expect_ok(layout_stats(one, m))));
  }

  TEST_CASE("diff lists changed options in the layouts' order") {
    const Manifest m = manifest_of(kTwoMatrices);
    const Layout a = expect_ok(plan(m, options(Strategy::layerwise, 2, 1 << 20)));
    PlanOptions o = options(Strategy::layerwise, 4, std::nullopt);
    o.packer = Packer::balanced;
    const LayoutDiff d = expect_ok(diff_layouts(a, expect_ok(plan(m, o))));
    REQUIRE(d.options.size() == 4);
    CHECK(d.options[0].name == "dp");
    CHECK(d.options[0].before == "2");
    CHECK(d.options[0].after == "4");
    CHECK(d.options[2].name == "bucket_size");
    CHECK(d.options[2].after == "null");
    CHECK(d.options[3].after == "\"balanced\"");
    CHECK_FALSE(d.identical());
    CHECK(d.verdict().find("options changed: dp, expert_dp, bucket_size, packer") == 0);
  }

  TEST_CASE("the picture's colours: a layer each up to 12, then ranges of layers") {
    Layout l;
    BufferLayout& b = l.buffers.emplace_back();
    for (int i = 0; i < 61; ++i) {
      b.params.push_back({l.names->add("decoder.layers." + std::to_string(i) + ".w"), 0, 1, 0, 0});
    }
    b.params.push_back({l.names->add("mtp.layers.0.w"), 0, 1, 0, 0});
    const render::Palette p(l);
    // 61 layers in ranges of 7: 0-6, ..., 56-60.
    CHECK(p.colour_of("decoder.layers.6.x") == 0);
    CHECK(p.colour_of("decoder.layers.7.x") == 1);
    CHECK(p.label(0) == "layers 0-6");
    CHECK(p.label(8) == "layers 56-60");
    CHECK(p.label(p.colour_of("mtp.layers.0.w")) == "multi-token prediction");
    CHECK(p.label(p.colour_of("embedding.word_embeddings.weight")) == "embedding");
    CHECK(p.label(p.colour_of("output_layer.weight")) == "output layer");
    CHECK(p.label(p.colour_of("decoder.final_layernorm.weight")) == "not in a layer");
    CHECK(p.all().size() == 9 + 4);
    Layout few;
    few.buffers.emplace_back().params.push_back({few.names->add("layers.3.w"), 0, 1, 0, 0});
    CHECK(render::Palette(few).label(0) == "layer 3");
  }
}
