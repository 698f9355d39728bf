// job: FP8 and FP4 params (--fp8-param-gather, --fp4-param-gather) as Megatron-LM d98e8a64
// and Transformer Engine 2.17.1 build them: the weights of TE's linear modules (their
// fp8_meta_index params, TE module/base.py:1721-1741) in the decoder layers built under
// fp8_model_init (transformer_block.py:352-360; every multi-token prediction layer under
// fp8, multi_token_prediction.py:1927, none under fp4), except the first/last layers kept in
// bf16 (fp8_utils.py:711-727, fp4_utils.py:248-262); fp8 in a uint8 param buffer of one
// byte per element (param_and_grad_buffer.py:921-923), mxfp8 in a bfloat16 view of the grad
// buffer (1162-1177), nvfp4 packed two values a byte (1437-1522); grads as any param's.
#include <doctest/doctest.h>

#include "paramlayout/megatron_args.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using Args = std::vector<std::string>;

namespace {

Args model() {
  return {"--num-layers",
          "4",
          "--hidden-size",
          "64",
          "--num-attention-heads",
          "4",
          "--vocab-size",
          "1000",
          "--position-embedding-type",
          "rope",
          "--swiglu",
          "--disable-bias-linear",
          "--normalization",
          "RMSNorm",
          "--bf16",
          "--use-distributed-optimizer",
          "--fp8-format",
          "hybrid",
          "--fp8-param-gather"};
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

/// The model without fp8: bf16, the distributed optimizer.
Args bf16_model() {
  Args a = model();
  a.resize(a.size() - 3);  // drop --fp8-format hybrid --fp8-param-gather
  return a;
}

/// The figures of the chunk's one uint8 buffer.
const BufferStats& quantized_buffer(const JobPlan& p) {
  for (const BufferStats& b : p.chunks[0].stats.buffers) {
    if (b.key.param_dtype == DType::uint8) return b;
  }
  FAIL("no uint8 buffer");
  return p.chunks[0].stats.buffers.front();
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
    const JobPlan p = plan(model() + Args{"--fp8-recipe", "tensorwise", "--first-last-layers-bf16",
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
    CHECK(error(model() + Args{"--first-last-layers-bf16"})
              .find("delayed scaling does not support first / last layer in BF16") !=
          std::string::npos);
    // TE's replace_raw_data raises for MXFP8Tensor (tensor/utils.py:68-69), which DDP
    // calls for each quantized param without the flag (param_and_grad_buffer.py:1263-1291).
    CHECK(error(model() + Args{"--fp8-recipe", "mxfp8"}).find("replace_raw_data") !=
          std::string::npos);
    CHECK(error(model() + Args{"--fp8-recipe", "mxfp8", "--reuse-grad-buf-for-mxfp8-param-ag",
                               "--overlap-grad-reduce", "--overlap-param-gather",
                               "--overlap-param-gather-with-optimizer-step"})
              .find("optimizer_config.py:427") != std::string::npos);
    CHECK(error(model() + Args{"--fp8-recipe", "mxfp8", "--reuse-grad-buf-for-mxfp8-param-ag",
                               "--use-precision-aware-optimizer", "--optimizer-cpu-offload"})
              .find("arguments.py:1889") != std::string::npos);
    Args plain_ddp = model();
    plain_ddp.erase(std::find(plain_ddp.begin(), plain_ddp.end(), "--use-distributed-optimizer"));
    CHECK(error(plain_ddp).find("only supported with the distributed optimizer") !=
          std::string::npos);
  }

  TEST_CASE("fp8 params under tensorwise scaling keep Megatron-LM's float32 main params") {
    // optimizer_config.py:407-414: the precision-aware optimizer's TE master weights only
    // with delayed scaling; otherwise distrib_optimizer.py:421-450's float32 main params.
    const JobPlan delayed = plan(model() + Args{"--use-precision-aware-optimizer"});
    const JobPlan tensorwise =
        plan(model() + Args{"--use-precision-aware-optimizer", "--fp8-recipe", "tensorwise"});
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

// Per layer: qkv 192 x 64, proj 64 x 64, fc1 256 x 64, fc2 64 x 128 (above), 40960
// elements, every one a multiple of 64 (no alignment padding); 4 layers, 163840 = 1280 x
// 128 elements in one bucket (no --overlap-grad-reduce), padded to lcm(dp 2, 128) already.
constexpr std::int64_t kQuantizedElements = 4 * (192 * 64 + 64 * 64 + 256 * 64 + 64 * 128);

TEST_SUITE("job-mxfp8-nvfp4-params") {
  TEST_CASE("mxfp8 params: the param buffer is a bfloat16 view of the float32 grad buffer") {
    const JobPlan p =
        plan(model() + Args{"--fp8-recipe", "mxfp8", "--reuse-grad-buf-for-mxfp8-param-ag"});
    CHECK(stored_as(p, Storage::mxfp8).size() == 16);
    const BufferStats& b = quantized_buffer(p);
    CHECK(b.param_elements == kQuantizedElements);
    CHECK(b.padding == 0);
    // param_and_grad_buffer.py:1162-1177: one float32 buffer of numel; the params' view is
    // its first half as bfloat16 (no bytes of its own), all-gathered as bfloat16.
    CHECK(b.bytes_per_rank.params == 0);
    CHECK(b.bytes_per_rank.grads == kQuantizedElements * 4);
    CHECK(b.traffic.all_gather_bytes == kQuantizedElements * 2);
    CHECK(b.traffic.reduce_scatter_bytes == kQuantizedElements * 4);
  }

  TEST_CASE("the mxfp8 recipe without --fp8-param-gather leaves the params bf16") {
    const JobPlan p = plan(bf16_model() + Args{"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"});
    CHECK(stored_as(p, Storage::mxfp8).empty());
    for (const BufferStats& b : p.chunks[0].stats.buffers) {
      CHECK(b.key.param_dtype == DType::bfloat16);
    }
  }

  TEST_CASE("nvfp4 params: two values a byte in a packed param buffer of their own") {
    const JobPlan p = plan(bf16_model() + Args{"--fp4-format", "e2m1", "--fp4-param-gather"});
    CHECK(stored_as(p, Storage::nvfp4).size() == 16);
    const BufferStats& b = quantized_buffer(p);
    CHECK(b.param_elements == kQuantizedElements);
    // Each weight's half is a multiple of 64 too: packed, 81920 = 640 x 128 bytes.
    CHECK(b.bytes_per_rank.params == kQuantizedElements / 2);
    CHECK(b.bytes_per_rank.grads == kQuantizedElements * 4);
    CHECK(b.traffic.all_gather_bytes == kQuantizedElements / 2);
    for (const BufferLayout& buffer : p.chunks[0].layout.buffers) {
      CHECK(buffer.param_buffer.packed == (buffer.key.param_dtype == DType::uint8));
    }
  }

  TEST_CASE("nvfp4: the bf16 first / last layers, and multi-token prediction layers, stay bf16") {
    const JobPlan p =
        plan(bf16_model() + Args{"--fp4-format", "e2m1", "--fp4-param-gather",
                                 "--first-last-layers-bf16", "--num-layers-at-end-in-bf16", "2",
                                 "--mtp-num-layers", "1"});
    const std::vector<std::string> nvfp4 = stored_as(p, Storage::nvfp4);
    CHECK(nvfp4.size() == 4);  // layer 1 only (fp4_utils.py:248-262)
    for (const std::string& name : nvfp4) CHECK(name.find("decoder.layers.1.") == 0);
  }

  TEST_CASE("optimizer state: mxfp8 keeps float32 main params, nvfp4 follows --fp8-recipe") {
    // optimizer_config.py:407-413 (use_precision_aware_optimizer_no_fp8_or_ds_fp8 reads
    // fp8_recipe only, default delayed) and distrib_optimizer.py:421-455: float32 main
    // params (4) + bf16 moments (2 + 2) for mxfp8; FusedAdam's 16-bit remainders (2) +
    // moments for nvfp4 under the default recipe, float32 main params under another.
    const Args precision = {"--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16",
                            "--exp-avg-sq-dtype", "bf16"};
    const Args fp4 = {"--fp4-format", "e2m1", "--fp4-param-gather"};
    const auto per_element = [](const JobPlan& p) {
      const BufferStats& b = quantized_buffer(p);
      return b.bytes_per_rank.optimizer / ((b.param_elements + b.padding) / 2);
    };
    CHECK(per_element(plan(model() + precision +
                           Args{"--fp8-recipe", "mxfp8", "--reuse-grad-buf-for-mxfp8-param-ag"})) ==
          8);
    CHECK(per_element(plan(bf16_model() + precision + fp4)) == 6);
    CHECK(per_element(plan(bf16_model() + precision + fp4 + Args{"--fp8-recipe", "tensorwise"})) ==
          8);
    CHECK(per_element(plan(bf16_model() + fp4)) == 12);  // Adam: float32 main + two moments
  }

  TEST_CASE("fp4 params that Megatron-LM refuses, or that cannot be known, are refused") {
    CHECK(error(bf16_model() + Args{"--fp4-param-gather"}).find("--fp4-format") !=
          std::string::npos);
    CHECK(error(bf16_model() +
                Args{"--fp4-format", "e2m1", "--fp4-param-gather", "--fp4-recipe", "custom"})
              .find("cannot be known ahead of time") != std::string::npos);
    CHECK(error(bf16_model() + Args{"--reuse-grad-buf-for-mxfp8-param-ag"})
              .find("needs --fp8-param-gather") != std::string::npos);
  }
}

TEST_SUITE("quantized-param-buffer") {
  Manifest manifest(const char* params) {
    return expect_ok(parse_manifest(
        std::string(R"({"schema": "paramlayout.manifest/v1", "params": [)") + params + "]}",
        "m.json"));
  }

  TEST_CASE("nvfp4 offsets: reverse order, starts aligned to 64, bucket ends to lcm(dp, 128)") {
    const Manifest m = manifest(
        R"({"name": "a", "shape": [100, 64], "dtype": "bfloat16", "storage": "nvfp4"},
           {"name": "b", "shape": [30, 32], "dtype": "bfloat16", "storage": "nvfp4"})");
    PlanOptions o;
    o.dp = 4;
    o.expert_dp = 4;
    const Layout l = expect_ok(plan(m, o));
    REQUIRE(l.buffers.size() == 1);
    const ParamBufferLayout& packed = l.buffers[0].param_buffer;
    REQUIRE(packed.packed);
    CHECK_FALSE(packed.in_grad_buffer);
    // b first (backprop order): 960 / 2 = 480 bytes at 0; a: 6400 / 2 = 3200 at pad(480, 64)
    // = 512; the bucket ends at pad(3712, 128) = 3712.
    REQUIRE(packed.params.size() == 2);
    CHECK(packed.params[0].name == "b");
    CHECK(packed.params[0].start == 0);
    CHECK(packed.params[0].end == 480);
    CHECK(packed.params[1].start == 512);
    CHECK(packed.params[1].end == 3712);
    CHECK(packed.numel == 3712);
    REQUIRE(packed.buckets.size() == 1);
    CHECK(packed.buckets[0] == BucketRange{0, 3712, 3712});
  }

  TEST_CASE("an nvfp4 param with an odd last dimension cannot be packed") {
    const Manifest m = manifest(R"({"name": "w", "shape": [4, 7], "dtype": "bfloat16",
                                    "storage": "nvfp4"})");
    const Result<Layout> l = plan(m, PlanOptions{});
    REQUIRE_FALSE(l);
    CHECK(l.error().message.find("two values a byte") != std::string::npos);
  }

  TEST_CASE("mxfp8 under plain DDP: no param buffer to share, so none in the grad buffer") {
    const Manifest m = manifest(R"({"name": "w", "shape": [64, 64], "dtype": "bfloat16",
                                    "storage": "mxfp8"})");
    PlanOptions o;
    o.strategy = Strategy::unpadded;
    CHECK_FALSE(expect_ok(plan(m, o)).buffers[0].param_buffer.in_grad_buffer);
    CHECK(expect_ok(plan(m, PlanOptions{})).buffers[0].param_buffer.in_grad_buffer);
  }
}
