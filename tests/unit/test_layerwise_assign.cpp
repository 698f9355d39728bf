// The balanced packer's last steps and the chooser: packing by cost and giving bins to
// shards (worked out by hand), the whole balanced packing of a buffer against its limits,
// and the chooser falling back to Megatron-LM's packing over a shard count.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "layerwise/assign.hpp"
#include "layerwise/balanced.hpp"
#include "layerwise/layerwise.hpp"
#include "layerwise/megatron.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using namespace paramlayout::layerwise;
using paramlayout::test::expect_ok;

namespace {

/// Two buffers (bfloat16 and float32) on the same 2 ranks, where a buffer kept Megatron-LM's
/// way loads the rank the other's balanced packing made heavy (found by packer_fuzz.py).
Manifest two_buffers() {
  return expect_ok(parse_manifest(R"({"schema": "paramlayout.manifest/v1",
    "params": [{"name": "p0", "shape": [320, 128], "dtype": "bfloat16"},
               {"name": "p1", "shape": [192, 192], "dtype": "bfloat16"},
               {"name": "p2", "shape": [128, 192], "dtype": "bfloat16"},
               {"name": "p3", "shape": [320, 192], "dtype": "bfloat16"},
               {"name": "p4", "shape": [64, 192], "dtype": "float32"},
               {"name": "p5", "shape": [320, 192], "dtype": "bfloat16"},
               {"name": "p6", "shape": [128, 128], "dtype": "bfloat16"},
               {"name": "p7", "shape": [256, 128], "dtype": "float32"}]})",
                                  "two.json"));
}

PlanOptions layerwise_at(std::int64_t dp, std::optional<std::int64_t> bucket_size) {
  PlanOptions options;
  options.strategy = Strategy::layerwise;
  options.dp = options.expert_dp = dp;
  options.bucket_size = bucket_size;
  return options;
}

/// Whether two layouts' buffers place every param and bucket alike.
bool same(const std::vector<BufferLayout>& a, const std::vector<BufferLayout>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].buckets != b[i].buckets || a[i].params != b[i].params || a[i].numel != b[i].numel) {
      return false;
    }
  }
  return true;
}

/// Every layerwise buffer of `m` laid out by a chooser of `packer`, settled.
struct Chosen {
  std::vector<BufferLayout> before_settling;
  std::vector<BufferLayout> buffers;
};
Chosen choose(const Manifest& m, const PlanOptions& options, Packer packer) {
  const std::vector<BufferGroup> groups = group_params(m, options);
  Chooser chooser(packer);
  Chosen out;
  out.buffers.resize(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    out.buffers[i].key = groups[i].key;
    out.buffers[i].strategy = Strategy::layerwise;
    out.buffers[i].num_shards = groups[i].num_shards;
    REQUIRE(chooser.lay_out({m, groups[i], options}, i, out.buffers[i]).ok());
  }
  out.before_settling = out.buffers;
  chooser.settle(out.buffers);
  return out;
}

}  // namespace

TEST_SUITE("layerwise") {
  TEST_CASE("packing by cost puts the costliest param in the cheapest shard with room") {
    // 2 shards of 10: 100 to shard 0, 90 to shard 1, 50 to shard 1 (90 < 100), 40 to
    // shard 0 (shard 1 has 1 left).
    const std::vector<Size> span{5, 5, 4, 4};
    const std::vector<Cost> cost{100, 90, 50, 40};
    CHECK(pack_by_cost(span, cost, 0, 4, {2, 1}, 10) == BinOf{0, 1, 1, 0});
    CHECK_FALSE(pack_by_cost(span, cost, 0, 4, {2, 1}, 8).has_value());
    CHECK_FALSE(pack_by_cost(span, cost, 0, 4, {65, 1}, 10).has_value());
    // Equal costs: the larger span first, so the 6 gets shard 0.
    CHECK(pack_by_cost(std::vector<Size>{2, 6}, std::vector<Cost>{7, 7}, 0, 2, {2, 1}, 6) ==
          BinOf{1, 0});
  }

  TEST_CASE("bins go costliest first onto the least-loaded shards") {
    // Bucket 0 first (its costliest bin, 10, is the larger): 10 to shard 0, 1 to shard 1;
    // then bucket 1: 8 to shard 1 (load 1), 2 to shard 0: loads 12 and 9.
    std::vector<Cost> load{0, 0};
    const auto shard_of_bin = assign_bins({{10, 1}, {8, 2}}, load, 100);
    CHECK(shard_of_bin == std::vector<std::vector<std::int64_t>>{{0, 1}, {1, 0}});
    CHECK(load == std::vector<Cost>{12, 9});
  }

  TEST_CASE("a swap of two bins lightens the heaviest shard down to the target") {
    // Loads 9 and 7 before. Bucket 0: 9 to shard 1, 8 to shard 0 (17, 16); bucket 1: 5 to
    // shard 1, 2 to shard 0 (19, 21). Above a target of 20, swapping bucket 0's bins gives
    // 20 and 20; at 21 nothing moves.
    std::vector<Cost> load{9, 7};
    CHECK(assign_bins({{9, 8}, {2, 5}}, load, 20) ==
          std::vector<std::vector<std::int64_t>>{{0, 1}, {0, 1}});
    CHECK(load == std::vector<Cost>{20, 20});
    load = {9, 7};
    CHECK(assign_bins({{9, 8}, {2, 5}}, load, 21) ==
          std::vector<std::vector<std::int64_t>>{{1, 0}, {0, 1}});
    CHECK(load == std::vector<Cost>{19, 21});
  }

  TEST_CASE("each bucket's bins go to distinct shards and the loads add up") {
    std::mt19937_64 rng(5);
    for (int round = 0; round < 200; ++round) {
      const std::size_t dp = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
      std::vector<std::vector<Cost>> bin_cost(
          std::uniform_int_distribution<std::size_t>(1, 5)(rng));
      for (auto& bins : bin_cost) {
        bins.resize(dp);
        for (Cost& c : bins) c = std::uniform_int_distribution<int>(0, 50)(rng);
      }
      std::vector<Cost> load(dp);
      for (Cost& c : load) c = std::uniform_int_distribution<int>(0, 50)(rng);
      std::vector<Cost> want = load;
      const auto shard_of_bin = assign_bins(bin_cost, load, 0);
      for (std::size_t b = 0; b < bin_cost.size(); ++b) {
        std::vector<std::int64_t> shards = shard_of_bin[b];
        std::sort(shards.begin(), shards.end());
        std::vector<std::int64_t> all(dp);
        std::iota(all.begin(), all.end(), 0);
        CHECK(shards == all);
        for (std::size_t bin = 0; bin < dp; ++bin) {
          want[static_cast<std::size_t>(shard_of_bin[b][bin])] += bin_cost[b][bin];
        }
      }
      CHECK(load == want);
    }
  }

  TEST_CASE("the balanced packing keeps within its limits") {
    // Llama-like repeats at dp 2: four layers of matrices of 3, 2 and 1 units of 64 x 64.
    Manifest m;
    m.source = "m.json";
    const char* names[] = {"a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3"};
    for (int i = 0; i < 12; ++i) {
      Param p;
      p.name = names[i];
      p.shape = {64 * (3 - i % 3), 64};
      p.numel = p.shape[0] * 64;
      m.params.push_back(p);
    }
    const PlanOptions options = layerwise_at(2, std::nullopt);
    const std::vector<BufferGroup> groups = group_params(m, options);
    REQUIRE(groups.size() == 1);
    const BufferJob job{m, groups[0], options};
    const std::vector<Cost> cost = expect_ok(newton_schulz_costs(job));
    // 24 units of 4096 elements in 2 shards of 12: no padding.
    const std::optional<Packing> packing =
        pack_balanced(job, cost, 1 << 20, {0, 0}, kMaxCost, true);
    REQUIRE(packing.has_value());
    CHECK(packing->size(2) == 24 * 4096);
    std::vector<int> seen(12, 0);
    for (const Packing::Slot& slot : packing->slots) ++seen[slot.param];
    CHECK(seen == std::vector<int>(12, 1));
    // Not in fewer elements than that, nor with the heaviest rank below the mean.
    CHECK_FALSE(pack_balanced(job, cost, 24 * 4096 - 1, {0, 0}, kMaxCost, true).has_value());
    const Cost total = std::accumulate(cost.begin(), cost.end(), Cost{0});
    CHECK_FALSE(pack_balanced(job, cost, 1 << 20, {0, 0}, total / 2 - 1, true).has_value());
    // Nor where a buffer that large could not be planned in 64 bits.
    CHECK_FALSE(pack_balanced(job, cost, Wide{1} << 62, {0, 0}, kMaxCost, true).has_value());
  }

  TEST_CASE("where the buffers kept load a rank more than Megatron-LM's would, all go back") {
    const Manifest m = two_buffers();
    const PlanOptions options = layerwise_at(2, 94094);
    const Chosen megatron = choose(m, options, Packer::megatron);
    const Chosen balanced = choose(m, options, Packer::balanced);
    CHECK(same(megatron.before_settling, megatron.buffers));
    CHECK_FALSE(same(balanced.before_settling, megatron.buffers));  // a buffer balanced kept
    CHECK(same(balanced.buffers, megatron.buffers));  // then all packed Megatron-LM's way
  }
}
