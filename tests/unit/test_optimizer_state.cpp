// job: the optimizer state Megatron-LM allocates per element a rank owns, by
// optimizer and precision options, worked out by hand from Megatron-LM d98e8a64
// and Transformer Engine 2.17.1 (4329ff84, the version Megatron-LM's
// pyproject.toml pins):
//   distrib_optimizer.py:421-450  float32 main params for 16-bit params, unless
//   TE's FusedAdam
//                                 holds them (precision-aware); :466-469
//                                 float32 params are their own main params
//   optimizer/__init__.py:564-588 FusedAdam gets exp_avg_dtype,
//   exp_avg_sq_dtype,
//                                 master_weight_dtype and
//                                 store_param_remainders
//   fused_adam.py:213, 414-417    16-bit remainders (int16) of float32 master
//   weights for bf16
//                                 params; otherwise the master weights' dtype
//   optimizer.py:1097             Float16OptimizerWithFloat16Params:
//   main_grad.float(), a
//                                 float32 copy of each 16-bit grad
#include <doctest/doctest.h>

#include "paramlayout/megatron_args.hpp"
#include "paramlayout/optimizer_state.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::Args;
using paramlayout::test::operator+;

namespace {

int bytes(const OptimizerOptions &o, DType param, DType grad, bool layerwise = false) {
  return optimizer_state_bytes(o, param, grad, layerwise).total();
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
    o.distributed = true;  // the distributed optimizer reads the grad buffer's shard
    CHECK(bytes(o, DType::float16, DType::float16) == 12);
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
}
