// job: FP8 params (--fp8-param-gather) as Megatron-LM d98e8a64 and Transformer Engine 2.17.1
// build them: the weights of TE's linear modules (their fp8_meta_index params, TE
// module/base.py:1721-1741) in the decoder layers built under fp8_model_init
// (transformer_block.py:352-356; every multi-token prediction layer,
// multi_token_prediction.py:1927), except the first/last layers kept in bf16
// (fp8_utils.py:711-727); each in a uint8 param buffer of one byte per element
// (param_and_grad_buffer.py:921-923), its grads as any param's.
#include <doctest/doctest.h>

#include "paramlayout/megatron_args.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using Args = std::vector<std::string>;

namespace {

Args model() {
  return {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
          "--vocab-size", "1000", "--position-embedding-type", "rope", "--swiglu",
          "--disable-bias-linear", "--normalization", "RMSNorm", "--bf16",
          "--use-distributed-optimizer", "--fp8-format", "hybrid", "--fp8-param-gather"};
}

Args operator+(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

JobPlan plan(const Args& args) {
  return expect_ok(plan_job(expect_ok(job_from_megatron_args(args, 2, nullptr))));
}

std::string error(const Args& args) {
  Result<JobSpec> r = job_from_megatron_args(args, 2, nullptr);
  REQUIRE_FALSE(r);
  return r.error().message;
}

/// The names of the params stored as `storage`.
std::vector<std::string> stored_as(const JobPlan& p, Storage storage) {
  std::vector<std::string> out;
  for (const Param& param : p.chunks[0].manifest.params) {
    if (param.storage == storage) out.emplace_back(param.name);
  }
  return out;
}

}  // namespace

TEST_SUITE("job-fp8-params") {
  TEST_CASE("TE linears' weights are fp8; norms, the embedding and the output layer are not") {
    const JobPlan p = plan(model() + Args{"--untie-embeddings-and-output-weights"});
    const std::vector<std::string> fp8 = stored_as(p, Storage::fp8);
    CHECK(fp8.size() == 16);  // 4 layers x (qkv, proj, fc1, fc2)
    for (const std::string& name : fp8) {
      CHECK(name.find(".layer_norm_weight") == std::string::npos);
      CHECK(name.find("embedding") == std::string::npos);
      CHECK(name.find("output_layer") == std::string::npos);
    }
    // h = 64, 4 heads of 16, swiglu ffn 4h x 2/3 to a multiple of 64 = 128:
    // qkv 192 x 64, proj 64 x 64, fc1 256 x 64, fc2 64 x 128 per layer.
    const std::int64_t per_layer = 192 * 64 + 64 * 64 + 256 * 64 + 64 * 128;
    std::int64_t uint8_params = 0;
    for (const BufferStats& b : p.chunks[0].stats.buffers) {
      if (b.key.param_dtype == DType::uint8) {
        uint8_params += b.param_elements;
        CHECK(b.key.grad_dtype == DType::float32);
      }
    }
    CHECK(uint8_params == 4 * per_layer);
  }

  TEST_CASE("--first-last-layers-bf16 keeps those layers' weights bf16") {
    const JobPlan p = plan(model() + Args{"--fp8-recipe", "tensorwise",
                                          "--first-last-layers-bf16",
                                          "--num-layers-at-end-in-bf16", "2"});
    const std::vector<std::string> fp8 = stored_as(p, Storage::fp8);
    CHECK(fp8.size() == 4);  // layer 1 only
    for (const std::string& name : fp8) CHECK(name.find("decoder.layers.1.") == 0);
  }

  TEST_CASE("multi-token prediction layers are fp8 whatever the bf16 layers") {
    const JobPlan p = plan(model() + Args{"--fp8-recipe", "blockwise", "--first-last-layers-bf16",
                                          "--mtp-num-layers", "1"});
    int mtp = 0;
    for (const std::string& name : stored_as(p, Storage::fp8)) mtp += name.find("mtp.") == 0;
    // qkv, proj, fc1, fc2 and eh_proj (TE's column-parallel linear,
    // multi_token_prediction.py:773-780).
    CHECK(mtp == 5);
  }

  TEST_CASE("what Megatron-LM refuses, and what cannot be planned, is refused with why") {
    Args no_fp8 = model();
    no_fp8.erase(no_fp8.end() - 3, no_fp8.end() - 1);  // drop --fp8-format hybrid
    CHECK(error(no_fp8).find("must be used together with fp8 mode") != std::string::npos);
    CHECK(error(model() + Args{"--first-last-layers-bf16"}).find(
              "delayed scaling does not support first / last layer in BF16") !=
          std::string::npos);
    CHECK(error(model() + Args{"--fp8-recipe", "mxfp8"}).find("share their all-gather") !=
          std::string::npos);
    Args plain_ddp = model();
    plain_ddp.erase(std::find(plain_ddp.begin(), plain_ddp.end(), "--use-distributed-optimizer"));
    CHECK(error(plain_ddp).find("only supported with the distributed optimizer") !=
          std::string::npos);
  }

  TEST_CASE("fp8 params under tensorwise scaling keep Megatron-LM's float32 main params") {
    // optimizer_config.py:407-414: the precision-aware optimizer's TE master weights only
    // with delayed scaling; otherwise distrib_optimizer.py:421-450's float32 main params.
    const JobPlan delayed = plan(model() + Args{"--use-precision-aware-optimizer"});
    const JobPlan tensorwise = plan(model() + Args{"--use-precision-aware-optimizer",
                                                   "--fp8-recipe", "tensorwise"});
    for (const JobPlan* p : {&delayed, &tensorwise}) {
      for (const BufferStats& b : p->chunks[0].stats.buffers) {
        const std::int64_t owned = (b.param_elements + b.padding) / 2;
        const bool fp8 = b.key.param_dtype == DType::uint8;
        // remainders (2) + moments (8), or float32 main params (4) + moments (8)
        CHECK(b.bytes_per_rank.optimizer == owned * (fp8 && p == &tensorwise ? 12 : 10));
      }
    }
  }
}
