// job with --transformer-impl local: the params of Megatron-Core's own modules, where the
// Transformer Engine spec fuses norms into the linear layers.
#include <doctest/doctest.h>

#include "paramlayout/plan_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::job_error;
using paramlayout::test::operator+;

namespace {

JobSpec job(const Args& args, std::int64_t world) { return test::job_spec(args, world); }

Args small_model() { return test::small_job_args(); }

}  // namespace

TEST_SUITE("job") {
  // --transformer-impl local: Megatron-Core's own modules (gpt_layer_specs.py:359-464,
  // get_gpt_layer_local_submodules): input_layernorm and pre_mlp_layernorm are modules of
  // their own, registered before self_attention and mlp, where the Transformer Engine spec
  // fuses them into linear_qkv and linear_fc1; routed experts are a SequentialMLP even with
  // --moe-grouped-gemm. The names, order and shapes below are those of Megatron-LM's own
  // GPTModel built with get_gpt_layer_local_spec at d98e8a64 (named_parameters(), layer 0).
  TEST_CASE("--transformer-impl local registers Megatron-Core's norms and experts") {
    const auto layer0 = [](const Args& extra) {
      const Args args = Args{"--transformer-impl",
                             "local",
                             "--num-layers",
                             "2",
                             "--hidden-size",
                             "64",
                             "--num-attention-heads",
                             "4",
                             "--vocab-size",
                             "128",
                             "--max-position-embeddings",
                             "32",
                             "--untie-embeddings-and-output-weights"} +
                        extra;
      const JobPlan plan = expect_ok(plan_job(job(args, 1)));
      std::vector<std::string> out;
      for (const Param& p : plan.chunks[0].manifest.params) {
        const std::string name(p.name);
        if (name.find(".layers.1.") != std::string::npos) continue;
        std::string shape;
        for (std::int64_t d : p.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        out.push_back(name + " " + shape);
      }
      return out;
    };
    const std::string l = "decoder.layers.0.";
    CHECK(layer0({"--normalization", "LayerNorm"}) ==
          Args{"embedding.word_embeddings.weight 128x64",
               "embedding.position_embeddings.weight 32x64", l + "input_layernorm.weight 64",
               l + "input_layernorm.bias 64", l + "self_attention.linear_proj.weight 64x64",
               l + "self_attention.linear_proj.bias 64",
               l + "self_attention.linear_qkv.weight 192x64",
               l + "self_attention.linear_qkv.bias 192", l + "pre_mlp_layernorm.weight 64",
               l + "pre_mlp_layernorm.bias 64", l + "mlp.linear_fc1.weight 256x64",
               l + "mlp.linear_fc1.bias 256", l + "mlp.linear_fc2.weight 64x256",
               l + "mlp.linear_fc2.bias 64", "decoder.final_layernorm.weight 64",
               "decoder.final_layernorm.bias 64", "output_layer.weight 128x64"});
    Args moe = {"embedding.word_embeddings.weight 128x64",
                "embedding.position_embeddings.weight 32x64",
                l + "input_layernorm.weight 64",
                l + "self_attention.linear_proj.weight 64x64",
                l + "self_attention.linear_qkv.weight 192x64",
                l + "pre_mlp_layernorm.weight 64",
                l + "mlp.router.weight 4x64"};
    for (int e = 0; e < 4; ++e) {
      const std::string x = l + "mlp.experts.local_experts." + std::to_string(e) + ".";
      moe.push_back(x + "linear_fc1.weight 256x64");
      moe.push_back(x + "linear_fc2.weight 64x256");
    }
    moe.push_back("decoder.final_layernorm.weight 64");
    moe.push_back("output_layer.weight 128x64");
    const Args rms_moe = {"--normalization", "RMSNorm", "--num-experts", "4",
                          "--disable-bias-linear"};
    CHECK(layer0(rms_moe + Args{"--moe-grouped-gemm"}) == moe);
    moe.insert(moe.begin() + 5, {l + "self_attention.q_layernorm.weight 16",
                                 l + "self_attention.k_layernorm.weight 16"});
    CHECK(layer0(rms_moe + Args{"--qk-layernorm"}) == moe);
    // What the local spec builds beyond these is refused, saying so.
    CHECK(job_error(small_model() + Args{"--transformer-impl", "local", "--multi-latent-attention",
                                         "--position-embedding-type", "rope"},
                    1)
              .find("local with multi-latent attention is not modelled") != std::string::npos);
  }
}
