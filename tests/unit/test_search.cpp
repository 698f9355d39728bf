// search: the launches a search tries, counted by hand, and the step estimate's terms worked
// out from their formulas (docs/search.md) on a small GPT.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "paramlayout/megatron_args.hpp"
#include "paramlayout/step_estimate.hpp"
#include "search/launch_shapes.hpp"
#include "search/layout_strings.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

Args small_model(std::int64_t layers) {
  return test::small_gpt_args(layers) +
         Args{"--vocab-size",        "1000", "--micro-batch-size", "1",
              "--global-batch-size", "64",   "--seq-length",       "128"};
}

struct Shapes {
  std::vector<search::LaunchShape> shapes;
  std::vector<search::EarlyRefusal> refused;
};

Shapes shapes_of(const Args& line, std::int64_t world, std::vector<SearchDimension> fixed) {
  const JobSpec base = expect_ok(job_from_megatron_args(line, world, nullptr));
  SearchSpace space;
  space.fixed = std::move(fixed);
  const std::vector<bool> given = expect_ok(search::dimensions_given(line));
  Shapes out;
  out.shapes = search::launch_shapes(base, space, given, out.refused);
  return out;
}

}  // namespace

TEST_SUITE("search") {
  TEST_CASE("tp, pp and cp: every ordered triple of divisors whose product divides the world") {
    using D = SearchDimension;
    const Shapes s = shapes_of(small_model(4), 8, {D::vpp, D::split, D::distributed_optimizer});
    // 8 = 2^3: exponents (a, b, c) with a + b + c <= 3 are C(6, 3) = 20 of the 4^3 = 64.
    CHECK(s.shapes.size() == 20);
    CHECK(s.refused.size() == 44);
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    for (const search::LaunchShape& shape : s.shapes) {
      CHECK(8 % (shape.tp * shape.pp * shape.cp) == 0);
      seen.insert({shape.tp, shape.pp, shape.cp});
    }
    CHECK(seen.size() == 20);
  }

  TEST_CASE("a sequence context parallelism cannot halve is refused before planning") {
    using D = SearchDimension;
    // 96 = 2 x 48: cp 16 needs a multiple of 32 (arguments.py:1336), cp 64 of 128.
    const Args line = test::small_gpt_args(4) + Args{"--vocab-size",
                                                     "1000",
                                                     "--seq-length",
                                                     "96",
                                                     "--tensor-model-parallel-size",
                                                     "1",
                                                     "--pipeline-model-parallel-size",
                                                     "1"};
    const Shapes s = shapes_of(line, 64, {D::vpp, D::split, D::distributed_optimizer});
    std::vector<std::int64_t> cps;
    for (const search::LaunchShape& shape : s.shapes) cps.push_back(shape.cp);
    CHECK(cps == std::vector<std::int64_t>{1, 2, 4, 8, 16});
    REQUIRE(s.refused.size() == 2);
    CHECK(s.refused[1].reason ==
          "--seq-length 96 is not a multiple of 2 x --context-parallel-size 64 "
          "(arguments.py:1336)");
  }

  TEST_CASE("the splits of 10 layers over 4 stages, and the virtual stages of 8 over 2") {
    using D = SearchDimension;
    const Shapes s = shapes_of(small_model(10) + Args{"--pipeline-model-parallel-size", "4"}, 4,
                               {D::tp, D::cp, D::vpp, D::distributed_optimizer});
    std::vector<std::pair<std::int64_t, std::int64_t>> ends;
    int even = 0, counted = 0;
    for (const search::LaunchShape& shape : s.shapes) {
      const search::PipelineSplit& p = shape.split;
      REQUIRE(p.layout.empty());  // the balanced layout places as --account-for-... does
      if (p.account_for_embedding_and_loss) {
        ++counted;
      } else if (!p.first_stage_layers && !p.last_stage_layers) {
        ++even;
      } else {
        ends.emplace_back(p.first_stage_layers.value_or(0), p.last_stage_layers.value_or(0));
      }
    }
    CHECK(even == 1);
    CHECK(counted == 1);
    // Middle stages of 2: the first or the last takes 4, or both 3; of 3: one takes 1, or
    // both 2.
    std::sort(ends.begin(), ends.end());
    CHECK(ends == std::vector<std::pair<std::int64_t, std::int64_t>>{
                      {0, 1}, {0, 4}, {1, 0}, {2, 2}, {3, 3}, {4, 0}});

    const Shapes v = shapes_of(small_model(8) + Args{"--pipeline-model-parallel-size", "2"}, 2,
                               {D::tp, D::cp, D::split, D::distributed_optimizer});
    std::vector<std::int64_t> vpps;
    for (const search::LaunchShape& shape : v.shapes) vpps.push_back(shape.vpp);
    CHECK(vpps == std::vector<std::int64_t>{1, 2, 4});  // the divisors of 8 / 2 layers
  }

  TEST_CASE("the ends' weights in decoder layers, and the layouts balanced by them") {
    // A layer of hidden 64 (ffn 256): 12 x 64^2 + 13 x 64 = 49,984 params. The embedding:
    // 1024 (1000 padded to 128) x 64 + 128 positions x 64 = 73,728, 1.47 layers; the output
    // layer and final norm: 1024 x 64 + 2 x 64 = 65,664, 1.31 layers.
    const JobSpec small = expect_ok(job_from_megatron_args(small_model(4), 1, nullptr));
    const search::EndWeights w = search::end_weights(small.model);
    CHECK(w.embedding == 1);
    CHECK(w.loss == 1);
    // A 32,000 vocabulary: (32,000 x 64 + 8,192) / 49,984 = 41.1 and
    // (32,000 x 64 + 128) / 49,984 = 40.98.
    const JobSpec wide = expect_ok(job_from_megatron_args(
        test::small_gpt_args(4) + Args{"--vocab-size", "32000"}, 1, nullptr));
    const search::EndWeights ww = search::end_weights(wide.model);
    CHECK(ww.embedding == 41);
    CHECK(ww.loss == 41);

    // 10 layers + 2 units over 4 stages: boundaries round(3 i) - 1 = 2, 5, 8.
    CHECK(search::balanced_layout(10, 0, 4, {1, 1}) ==
          std::vector<std::string>{"Ett", "ttt", "ttt", "ttL"});
    // 6 layers + 2 units of loss over 3 stages: boundaries round(8 i / 3) = 3, 5.
    CHECK(search::balanced_layout(6, 1, 3, {0, 2}) ==
          std::vector<std::string>{"Ettt", "tt", "tmL"});
    // An embedding heavier than a stage's share leaves the first stage without layers.
    CHECK(search::balanced_layout(4, 0, 2, {5, 0}) == std::vector<std::string>{"E", "ttttL"});
    // A loss of 6 over 4 stages of 8 layers + 8 units (4 each): the last stage alone holds
    // more, so the other three share 8 + 2: 3.33 each, running sums 1.33, 4.67, 8.
    CHECK(search::balanced_layout(8, 1, 4, {2, 6}) ==
          std::vector<std::string>{"Et", "tttt", "ttt", "mL"});
  }

  TEST_CASE("a search tries the balanced layout where no split by argument places as it does") {
    using D = SearchDimension;
    // 9 layers + 2 units over 4 stages: boundaries round(11 i / 4) - 1 = 2, 5, 7. The splits by
    // argument give 3,2,2,2 / 2,2,2,3 / 1,3,3,2 / 2,3,3,1 (9 is not 4 even stages, nor
    // 11 with the ends).
    const Shapes s = shapes_of(small_model(9) + Args{"--pipeline-model-parallel-size", "4"}, 4,
                               {D::tp, D::cp, D::vpp, D::distributed_optimizer});
    std::vector<std::string> layouts;
    for (const search::LaunchShape& shape : s.shapes) {
      if (!shape.split.layout.empty()) layouts.push_back(shape.split.layout);
    }
    CHECK(layouts == std::vector<std::string>{"Et*2|t*3|t*2|t*2L"});

    // 16 layers + 2 over 2 x v stages, for the v that the splits by argument allow (the
    // divisors of 8 and of 9) up to 8: v = 1 gives 8,8 (even); v = 3 gives 2,3,3,3,3,2, as
    // --account-for-... does; v = 2 gives 4,4,5,3, v = 4 gives 1,3,2,2,2,3,2,1 and v = 8
    // boundaries round(18 i / 16) - 1: 0,1,1,2,1,1,1,1,1,1,1,2,1,1,1,0.
    const Shapes v = shapes_of(small_model(16) + Args{"--pipeline-model-parallel-size", "2"}, 2,
                               {D::tp, D::cp, D::distributed_optimizer});
    std::vector<std::pair<std::string, std::int64_t>> tried;
    for (const search::LaunchShape& shape : v.shapes) {
      if (!shape.split.layout.empty()) tried.emplace_back(shape.split.layout, shape.vpp);
    }
    CHECK(tried == std::vector<std::pair<std::string, std::int64_t>>{
                       {"Et*4|t*4|t*5|t*3L", 2},
                       {"Et|t*3|(t*2|)*3,t*3|t*2|tL", 4},
                       {"E|(t|)*2,t*2|(t|)*7,t*2|(t|)*3,L", 8}});
    const search::LaunchShape& laid = *std::find_if(
        v.shapes.begin(), v.shapes.end(), [](const auto& x) { return !x.split.layout.empty(); });
    SearchSpace space;
    space.fixed = {D::tp, D::cp, D::distributed_optimizer};
    const std::vector<std::string> added =
        search::added_arguments(laid, {}, space, std::vector<bool>(kSearchDimensions, false));
    CHECK(std::find(added.begin(), added.end(), "--pipeline-model-parallel-layout") != added.end());
    CHECK(std::find(added.begin(), added.end(), "--num-virtual-stages-per-pipeline-rank") ==
          added.end());
  }

  TEST_CASE("the step estimate's terms on a small GPT, from their formulas") {
    // tp 2, pp 2, dp 2 on 8 GPUs: 64 / (1 x 2) = 32 micro-batches per step.
    const Args line = small_model(4) + Args{"--tensor-model-parallel-size", "2",
                                            "--pipeline-model-parallel-size", "2", "--bf16"};
    const JobSpec job = expect_ok(job_from_megatron_args(line, 8, nullptr));
    const JobPlan plan = expect_ok(plan_job(job, JobPlanUse::figures));
    LinkModel links;
    const StepEstimate e = expect_ok(estimate_step(job, plan, links));
    const double m = 32, h = 64, s = 128, bytes = 2;
    const double hidden = h * s * bytes;
    // Each of a stage's 2 layers: attention and MLP each all-reduce s x b x h forward and
    // backward, 2 (t - 1) / t = 1 of it per rank each time.
    CHECK(e.traffic.tensor_parallel == doctest::Approx(2 * 2 * 2 * 1.0 * hidden * m));
    CHECK(e.traffic.context_parallel == 0);
    CHECK(e.traffic.expert_parallel == 0);
    // One chunk per stage: its output forward and its input's grad backward.
    CHECK(e.traffic.pipeline == doctest::Approx(2 * m * hidden));
    CHECK(e.bubble_fraction == doctest::Approx(1.0 / 32));
    // 6 FLOPs per param and token: the params of one tensor-parallel rank of each stage,
    // times tp, over the world's 8 GPUs at 400 TFLOP/s.
    // One tensor-parallel rank's params (h = 64, vocabulary padded to 1,024): each layer's
    // qkv 3h/2 x h + 3h/2, proj h/2 x h + h, fc1 2h x h + 2h, fc2 2h x h + h and two
    // LayerNorms 4h; the word embedding 512 x h and positions 128 x h on the first stage;
    // the final LayerNorm 2h and the tied output's copy 512 x h on the last. Times tp.
    const double layer =
        1.5 * h * h + 1.5 * h + 0.5 * h * h + h + 2 * h * h + 2 * h + 2 * h * h + h + 4 * h;
    const double params = 2 * (4 * layer + 512 * h + 128 * h + 2 * h + 512 * h);
    double planned = 0;
    for (const JobChunk& c : plan.chunks) planned += static_cast<double>(c.param_elements);
    REQUIRE(2 * planned == params);
    const double tokens = 64 * 128;
    CHECK(e.compute_seconds == doctest::Approx(6 * params * tokens / (8 * 400e12)));
    CHECK(e.bubble_seconds == doctest::Approx(e.compute_seconds / 32));
  }
}
