// job: the optimizer state Megatron-LM allocates for the params a rank owns, by optimizer,
// param and precision options, worked out by hand from Megatron-LM d98e8a64 and Transformer
// Engine 2.17.1 (4329ff84, the version Megatron-LM's pyproject.toml pins):
// - distrib_optimizer.py:421-450: float32 main params for 16-bit params, unless TE's
//   FusedAdam holds them (precision-aware); :466-469 float32 params are their own;
// - optimizer/__init__.py:564-588: FusedAdam gets exp_avg_dtype, exp_avg_sq_dtype,
//   master_weight_dtype and store_param_remainders;
// - fused_adam.py:213, 414-417: 16-bit remainders (int16) of float32 master weights for bf16
//   params; otherwise the master weights' dtype;
// - optimizer.py:1097 (Float16OptimizerWithFloat16Params, main_grad.float()) and
//   distrib_optimizer.py:2792 (shard_model_grad.float()): a float32 copy of each 16-bit grad;
//   the precision-aware optimizer reads the grad buffer's shard (:2790, decoupled_grad).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "job/optimizer_charge.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/optimizer_state.hpp"
#include "paramlayout/plan.hpp"
#include "paramlayout/stats.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

int bytes(const OptimizerOptions &o, DType param, DType grad, bool layerwise = false) {
  const ParamOptimizer optimizer = layerwise         ? ParamOptimizer::muon
                                   : o.name == "sgd" ? ParamOptimizer::sgd
                                                     : ParamOptimizer::adam;
  const StateHolder holder =
      o.distributed && !layerwise ? StateHolder::distributed : StateHolder::whole_params;
  return optimizer_state_bytes(o, optimizer, holder, param, grad).total();
}

Args small_model() { return test::small_gpt_args(2) + Args{"--vocab-size", "1000"}; }

/// The job's optimizer state per rank, and the elements each rank owns.
std::pair<std::int64_t, std::int64_t> state_and_owned(const Args &args, std::int64_t world) {
  const JobSpec job = expect_ok(job_from_megatron_args(small_model() + args, world, nullptr));
  const JobPlan plan = expect_ok(plan_job(job));
  std::int64_t owned = 0;
  for (const BufferLayout &b : plan.chunks[0].layout.buffers) {
    owned += b.strategy == Strategy::unpadded ? b.numel : b.numel / b.num_shards.value_or(1);
  }
  return {plan.chunks[0].stats.bytes_per_rank.optimizer, owned};
}

JobPlan planned(const Args &args, std::int64_t world) {
  const JobSpec job = expect_ok(job_from_megatron_args(small_model() + args, world, nullptr));
  return expect_ok(plan_job(job));
}

const Param &param_named(const Manifest &m, std::string_view name) {
  for (const Param &p : m.params) {
    if (p.name == name) return p;
  }
  FAIL("no param " << name);
  return m.params.front();
}

bool emerging_matrix(const Param &p) { return p.shape.size() == 2 && !p.embedding_or_output; }

std::string job_error(const Args &args) {
  Result<JobSpec> r = job_from_megatron_args(small_model() + args, 2, nullptr);
  REQUIRE_FALSE(r);
  return r.error().message;
}

}  // namespace

TEST_SUITE("job-optimizer-state") {
  TEST_CASE(
      "Adam: float32 main params and two float32 moments; float32 params "
      "are their own") {
    OptimizerOptions o;
    o.distributed = true;
    CHECK(bytes(o, DType::bfloat16, DType::float32) == 12);
    CHECK(bytes(o, DType::float32, DType::float32) == 8);
    CHECK(bytes(o, DType::uint8, DType::float32) == 12);  // fp8 params: nominally bf16
    CHECK(bytes(o, DType::bfloat16, DType::float32, /*layerwise=*/true) == 8);  // Muon
  }

  TEST_CASE(
      "the precision-aware optimizer: moments in their dtypes, master "
      "remainders") {
    OptimizerOptions o;
    o.distributed = true;
    o.precision_aware = true;
    o.exp_avg_bytes = o.exp_avg_sq_bytes = 2;  // bf16 moments
    // 16-bit remainders of float32 master weights + bf16 + bf16.
    CHECK(bytes(o, DType::bfloat16, DType::float32) == 6);
    o.exp_avg_bytes = o.exp_avg_sq_bytes = 1;  // fp8 moments (uint8)
    CHECK(bytes(o, DType::bfloat16, DType::float32) == 4);
    o.main_params = DType::float16;  // no remainders: fp16 master weights
    CHECK(bytes(o, DType::bfloat16, DType::float32) == 4);
    o.main_params = DType::float32;
    CHECK(bytes(o, DType::float16, DType::float32) == 6);  // fp16 params: whole fp32 master
    o.exp_avg_bytes = o.exp_avg_sq_bytes = 4;
    // fp8 params under a recipe other than delayed: Megatron-LM's float32 main
    // params.
    o.quantized_params_not_delayed = true;
    CHECK(bytes(o, DType::uint8, DType::float32) == 12);
  }

  TEST_CASE("without the distributed optimizer, 16-bit grads are copied to float32") {
    OptimizerOptions o;
    CHECK(bytes(o, DType::float16, DType::float16) == 16);
    CHECK(bytes(o, DType::float16, DType::float32) == 12);  // grads already float32
    CHECK(bytes(o, DType::bfloat16, DType::bfloat16) == 16);
    // The distributed optimizer copies its shard of each 16-bit grad to float32
    // too (distrib_optimizer.py:2792, shard_model_grad.float()).
    o.distributed = true;
    CHECK(bytes(o, DType::float16, DType::float16) == 16);
    CHECK(bytes(o, DType::float16, DType::float32) == 12);
    // ... but not the precision-aware one: FusedAdam reads the shard
    // (decoupled_grad, :2790).
    o.precision_aware = true;
    o.main_params = DType::float32;
    CHECK(bytes(o, DType::bfloat16, DType::bfloat16) == 2 + 8);
  }

  TEST_CASE("CPU offload leaves no optimizer state on the GPU") {
    OptimizerOptions o;
    o.distributed = o.precision_aware = o.cpu_offload = true;
    CHECK(bytes(o, DType::bfloat16, DType::float32) == 0);
  }

  TEST_CASE("a launch line's optimizer options give each rank's state") {
    const Args dist = {"--bf16", "--use-distributed-optimizer"};
    auto [adam, owned] = state_and_owned(dist, 2);
    CHECK(adam == 12 * owned);
    auto [aware, owned2] =
        state_and_owned(dist + Args{"--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16",
                                    "--exp-avg-sq-dtype", "bf16"},
                        2);
    CHECK(owned2 == owned);
    CHECK(aware == 6 * owned);
    auto [fp16, whole] = state_and_owned({"--fp16"}, 2);
    CHECK(fp16 == 16 * whole);
    auto [fp32, whole32] = state_and_owned({}, 2);
    CHECK(fp32 == 8 * whole32);
    auto [offload, unused] = state_and_owned(
        dist + Args{"--use-precision-aware-optimizer", "--optimizer-cpu-offload"}, 2);
    CHECK(offload == 0);
  }

  TEST_CASE("precision options Megatron-LM refuses are refused with its reason") {
    CHECK(job_error({"--bf16", "--exp-avg-dtype", "bf16"})
              .find("can only be fp32 without --use-precision-aware-optimizer") !=
          std::string::npos);
    CHECK(job_error({"--bf16", "--use-precision-aware-optimizer"})
              .find("only supported with the distributed optimizer") != std::string::npos);
    CHECK(job_error({"--bf16", "--optimizer-cpu-offload", "--use-distributed-optimizer"})
              .find("must be used with --use-precision-aware-optimizer") != std::string::npos);
    CHECK(job_error({"--bf16", "--main-grads-dtype", "bf16"})
              .find("can only be fp32 without --use-precision-aware-optimizer") !=
          std::string::npos);
  }

  // The emerging optimizers, by hand from Megatron-LM d98e8a64 and emerging_optimizers 0.3.0
  // (the version its pyproject.toml pins):
  // - emerging_optimizers.py:140-147: Adam for embeddings, the output layer and params that
  //   are not 2-D; under Muon also for use_muon=False (:584-603);
  // - __init__.py:805-814: Muon's fallback is --muon-scalar-optimizer;
  // - orthogonalized_optimizer.py:145: Muon's momentum_buffer = zeros_like(p);
  // - adaptive_muon.py:162-166: adaptive Muon ("adamuon") adds a moment2_buffer of p's shape;
  // - lion.py:107: Lion's exp_avg = zeros_like(p);
  // - soap.py:151-158: SOAP's float32 exp_avg, exp_avg_sq, L (rows^2), R (cols^2) and Q_L,
  //   Q_R of the same sizes;
  // - layer_wise_optimizer.py:576-590: the layer-wise optimizer keeps float32 copies of
  //   16-bit params (Float16OptimizerWithFloat16Params).
  TEST_CASE("which optimizer Megatron-LM gives each param") {
    Param w;
    w.shape = {8, 4};
    Param bias;
    bias.shape = {8};
    Param embedding = w;
    embedding.embedding_or_output = true;
    Param no_muon = w;
    no_muon.use_muon = false;
    OptimizerOptions o;
    o.name = "muon";
    CHECK(param_optimizer(o, w) == ParamOptimizer::muon);
    CHECK(param_optimizer(o, bias) == ParamOptimizer::adam);
    CHECK(param_optimizer(o, embedding) == ParamOptimizer::adam);
    CHECK(param_optimizer(o, no_muon) == ParamOptimizer::adam);
    o.scalar_optimizer = "lion";
    CHECK(param_optimizer(o, bias) == ParamOptimizer::lion);
    o.name = "adaptive_muon";
    CHECK(param_optimizer(o, w) == ParamOptimizer::adaptive_muon);
    o.name = "soap";  // use_muon is Muon's alone; no --muon-scalar-optimizer
    CHECK(param_optimizer(o, no_muon) == ParamOptimizer::soap);
    CHECK(param_optimizer(o, bias) == ParamOptimizer::adam);
    CHECK(param_optimizer(o, embedding) == ParamOptimizer::adam);
    o.name = "lion";
    CHECK(param_optimizer(o, w) == ParamOptimizer::lion);
    CHECK(param_optimizer(o, bias) == ParamOptimizer::adam);
  }

  TEST_CASE("each emerging optimizer's state, per element and per matrix") {
    OptimizerOptions o;
    const auto per_element = [&](ParamOptimizer which) {
      return optimizer_state_bytes(o, which, StateHolder::whole_params, DType::bfloat16,
                                   DType::float32)
          .total();
    };
    CHECK(per_element(ParamOptimizer::muon) == 4 + 4);
    CHECK(per_element(ParamOptimizer::lion) == 4 + 4);
    CHECK(per_element(ParamOptimizer::adaptive_muon) == 4 + 4 + 4);
    CHECK(per_element(ParamOptimizer::soap) == 4 + 4 + 4);
    Param w;
    w.shape = {3, 5};
    w.numel = 15;
    CHECK(matrix_state_bytes(ParamOptimizer::soap, w) == 4 * (9 + 25 + 9 + 25));
    CHECK(matrix_state_bytes(ParamOptimizer::muon, w) == 0);
    CHECK(param_state_bytes(o, w, StateHolder::whole_params, DType::bfloat16, DType::float32,
                            15) == 12 * 15);  // Adam's: o.name is adam
    o.name = "soap";
    CHECK(param_state_bytes(o, w, StateHolder::whole_params, DType::bfloat16, DType::float32, 15) ==
          12 * 15 + 4 * 68);
    CHECK(param_state_bytes(o, w, StateHolder::whole_params, DType::bfloat16, DType::bfloat16,
                            15) == 16 * 15 + 4 * 68);  // + float32 copies of bf16 grads
  }

  TEST_CASE("SOAP without the distributed optimizer: every param on every rank") {
    const JobPlan plan = planned({"--bf16", "--optimizer", "soap"}, 2);
    const Manifest &m = plan.chunks[0].manifest;
    std::int64_t expected = 0;
    for (const Param &p : m.params) {
      expected += 12 * p.numel;  // float32 main param + two float32 moments
      if (emerging_matrix(p)) {
        expected += 8 * (p.shape[0] * p.shape[0] + p.shape[1] * p.shape[1]);
      }
    }
    CHECK(plan.chunks[0].stats.bytes_per_rank.optimizer == expected);
  }

  TEST_CASE(
      "the layer-wise optimizer: each rank's whole matrices, the rest "
      "sharded") {
    // bytes per element of the emerging optimizer's matrices and of the others'
    const std::tuple<Args, int, int> cases[] = {
        {{"--optimizer", "muon"}, 8, 12},
        {{"--optimizer", "muon", "--muon-scalar-optimizer", "lion"}, 8, 8},
        {{"--optimizer", "adaptive_muon"}, 12, 12},
        {{"--optimizer", "lion"}, 8, 12},
    };
    for (const auto &[args, matrix_bytes, other_bytes] : cases) {
      CAPTURE(args.back());
      const JobPlan plan = planned(Args{"--bf16", "--use-distributed-optimizer"} + args, 2);
      const JobChunk &c = plan.chunks[0];
      std::int64_t expected = 0;
      for (const BufferLayout &b : c.layout.buffers) {
        if (!b.key.layerwise) {
          expected += other_bytes * b.numel / *b.num_shards;
          continue;
        }
        std::vector<std::int64_t> rank(2, 0);
        for (const ParamSlot &slot : b.params) {
          const std::int64_t shard = b.buckets[slot.bucket].size() / 2;
          rank[(slot.start - b.buckets[slot.bucket].start) / shard] += matrix_bytes * slot.numel();
        }
        expected += std::max(rank[0], rank[1]);
      }
      CHECK(c.stats.bytes_per_rank.optimizer == expected);
    }
  }

  TEST_CASE(
      "--optimizer-offload-fraction: the last params in the groups' "
      "order stay") {
    // hybrid_optimizer.py:258-276: params move to the host while fewer than
    // fraction x all have; distrib_optimizer.py:485-495 and
    // __init__.py:373-374: the groups in order (no override first, 1-D params
    // and biases last), by offset in the buffer.
    const Args offload = {"--bf16", "--use-distributed-optimizer",
                          "--use-precision-aware-optimizer", "--optimizer-cpu-offload"};
    const JobPlan none = planned(offload + Args{"--optimizer-offload-fraction", "0"}, 1);
    const JobChunk &c = none.chunks[0];
    // Nothing moves: float32 main params + FusedAdam's float32 moments on the
    // GPU.
    CHECK(c.stats.bytes_per_rank.optimizer == 12 * c.param_elements);

    const JobPlan half = planned(offload + Args{"--optimizer-offload-fraction", "0.5"}, 1);
    std::vector<std::tuple<int, std::int64_t, std::int64_t>> order;  // group, start, numel
    for (const BufferLayout &b : half.chunks[0].layout.buffers) {
      for (const ParamSlot &slot : b.params) {
        const Param &p = param_named(half.chunks[0].manifest, slot.name);
        const bool no_decay = p.shape.size() == 1 || std::string_view(p.name).ends_with(".bias");
        order.emplace_back(no_decay ? 1 : 0, slot.start, slot.numel());
      }
    }
    std::sort(order.begin(), order.end());
    std::int64_t moved = 0;
    std::int64_t kept = 0;
    for (const auto &[group, start, numel] : order) {
      if (2 * moved < c.param_elements) {
        moved += numel;
      } else {
        kept += numel;
      }
    }
    CHECK(kept > 0);
    CHECK(half.chunks[0].stats.bytes_per_rank.optimizer == 12 * kept);
    CHECK(job_error(offload + Args{"--optimizer-offload-fraction", "0.5", "--use-mup"})
              .find("--use-mup") != std::string::npos);
  }

  TEST_CASE(
      "Lion or SOAP with the layer-wise optimizer and use_muon=False "
      "matrices: refused") {
    // Mamba's in_proj is use_muon=False (mamba_mixer.py:309): a DistOpt
    // buffer's param under SOAP's group, which Megatron-LM's distributed
    // optimizer cannot find.
    const Args mamba = {"--spec",
                        "megatron.core.models.hybrid.hybrid_layer_specs",
                        "hybrid_stack_spec",
                        "--hybrid-override-pattern",
                        "M*M",
                        "--hidden-size",
                        "64",
                        "--num-attention-heads",
                        "4",
                        "--vocab-size",
                        "1000",
                        "--position-embedding-type",
                        "none",
                        "--max-position-embeddings",
                        "128",
                        "--mamba-num-groups",
                        "2",
                        "--bf16",
                        "--use-distributed-optimizer"};
    for (const char *name : {"soap", "lion"}) {
      const JobSpec job =
          expect_ok(job_from_megatron_args(mamba + Args{"--optimizer", name}, 2, nullptr));
      Result<JobPlan> plan = plan_job(job);
      REQUIRE_FALSE(plan);
      CHECK(plan.error().message.find("in_proj.weight goes to") != std::string::npos);
    }
    const JobSpec muon =
        expect_ok(job_from_megatron_args(mamba + Args{"--optimizer", "muon"}, 2, nullptr));
    CHECK(plan_job(muon));  // Muon sends it to Adam
  }

  TEST_CASE("expert params outside the emerging optimizer with the layer-wise layout: refused") {
    // optimizer/__init__.py:918-926: Adam's expert-parallel groups (the experts' biases) have
    // no distributed optimizer of their own on the layer-wise path.
    const Args moe = {"--num-experts",
                      "4",
                      "--expert-model-parallel-size",
                      "2",
                      "--bf16",
                      "--use-distributed-optimizer",
                      "--optimizer",
                      "muon"};
    const JobSpec biased = expect_ok(job_from_megatron_args(small_model() + moe, 4, nullptr));
    Result<JobPlan> refused = plan_job(biased);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find(".bias is an expert-parallel param the emerging "
                                       "optimizer leaves to Adam") != std::string::npos);
    const JobSpec plain = expect_ok(
        job_from_megatron_args(small_model() + moe + Args{"--disable-bias-linear"}, 4, nullptr));
    CHECK(plan_job(plain));
    const JobSpec legacy = expect_ok(job_from_megatron_args(
        small_model() + moe + Args{"--no-use-layer-wise-param-layout"}, 4, nullptr));
    CHECK(plan_job(legacy));
  }

  TEST_CASE("without the layer-wise param layout, whole params are dealt out to the ranks") {
    // layer_wise_optimizer.py:713-760: every param whole on one rank; the judge
    // (tests/megatron/optimizer_state_judge.py) checks which, with Megatron-LM's own code.
    const Args legacy = {"--bf16", "--use-distributed-optimizer", "--optimizer", "muon",
                         "--no-use-layer-wise-param-layout"};
    const JobPlan one = planned(legacy, 1);
    std::int64_t all = 0;
    for (const Param &p : one.chunks[0].manifest.params) {
      all += (emerging_matrix(p) ? 8 : 12) * p.numel;  // Muon's or Adam's, float32 main params
    }
    CHECK(one.chunks[0].stats.bytes_per_rank.optimizer == all);
    std::int64_t previous = all;
    for (const std::int64_t world : {2, 3, 8}) {
      CAPTURE(world);
      const std::int64_t heaviest = planned(legacy, world).chunks[0].stats.bytes_per_rank.optimizer;
      CHECK(heaviest * world >= all);
      CHECK(heaviest < previous);
      previous = heaviest;
    }
  }
}

TEST_SUITE("job-optimizer-state") {
  TEST_CASE("the distributed optimizer keeps state for its shard's params, not its padding") {
    // 16 one-element bfloat16 params at dp 8: Megatron-LM starts each at a multiple of 64
    // (param_layout.py's alignment for the distributed optimizer), so the buffer is 1,024
    // elements and each rank's shard of 128 holds two params and 126 elements of padding.
    // Its state is made per param range (shard_main_param, distrib_optimizer.py:412-467):
    // 2 elements x (4 float32 main + 8 moments + 4 for the float32 copy of the bfloat16
    // grad, distrib_optimizer.py:2792) = 32 bytes, not 128 x 16.
    std::string text = R"({"schema": "paramlayout.manifest/v1", "params": [)";
    for (int i = 0; i < 16; ++i) {
      text += fmt::format(R"({}{{"name": "b{}", "shape": [1], "dtype": "bfloat16"}})",
                          i > 0 ? ", " : "", i);
    }
    text += "]}";
    JobChunk chunk;
    chunk.manifest = expect_ok(parse_manifest(text, "m.json"));
    PlanOptions options;
    options.dp = 8;
    chunk.layout = expect_ok(plan(chunk.manifest, options));
    REQUIRE(chunk.layout.buffers.size() == 1);
    const BufferLayout &b = chunk.layout.buffers[0];
    REQUIRE(b.numel == 1024);
    REQUIRE(b.num_shards == 8);
    for (const ParamSlot &slot : b.params) CHECK(slot.start % 64 == 0);
    chunk.stats = expect_ok(layout_stats(chunk.layout, chunk.manifest));
    JobSpec job;
    job.optimizer.distributed = true;
    JobPlan jobs;
    jobs.chunks.push_back(std::move(chunk));
    REQUIRE(charge_optimizer_state(job, jobs));
    REQUIRE(b.key.grad_dtype == DType::bfloat16);
    CHECK(jobs.chunks[0].stats.bytes_per_rank.optimizer == 2 * 16);
  }
}
