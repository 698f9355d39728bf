// Each Hugging Face architecture's mapping, param by param, against Megatron-LM's modules as
// Megatron-Bridge builds them: the shipped configs where a real one exists, and small configs
// written here (never stand-ins for a real model) for DeepSeek-V2, gpt-oss and Nemotron-H,
// whose config.json files are not shipped (testdata/configs/SOURCES.md). Shapes are worked out
// by hand from the configs' sizes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "hf_test_configs.hpp"
#include "paramlayout/synth.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;
using paramlayout::test::synth_config;
using namespace paramlayout::test::hf;

TEST_SUITE("synth") {
  TEST_CASE("Llama: attention_bias biases linear_qkv, mlp_bias every linear, differences noted") {
    // Granite-3B-code sets both: Hugging Face's q/k/v/o and MLP biases are exactly Megatron-LM's
    // add_bias_linear (32 heads of 80, no grouping: qkv 3 x 2560).
    const SynthModel granite = synth_config("granite-3b-code-base");
    auto s = shapes(granite);
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.bias") == Shape{2560});
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{7680});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.bias") == Shape{20480});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc2.bias") == Shape{2560});
    CHECK(s.count("output_layer.weight") == 0);  // tied
    CHECK(granite.notes.empty());

    // attention_bias alone: Megatron-LM's add_qkv_bias has no o_proj bias, 32 x 4096 fewer.
    const SynthModel qkv = synth_json(with("llama3-8b", {{"attention_bias", true}}));
    s = shapes(qkv);
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{6144});
    CHECK(s.count("decoder.layers.0.self_attention.linear_proj.bias") == 0);
    CHECK(s.count("decoder.layers.0.mlp.linear_fc1.bias") == 0);
    CHECK(qkv.numel() == synth_config("llama3-8b").numel() + 32 * 6144);
    REQUIRE(qkv.notes.size() == 1);
    CHECK(contains(qkv.notes[0], "o_proj"));
    CHECK(contains(qkv.notes[0], "131,072 checkpoint elements"));

    // mlp_bias alone: add_bias_linear also biases linear_qkv and linear_proj.
    const SynthModel mlp = synth_json(with("llama3-8b", {{"mlp_bias", true}}));
    s = shapes(mlp);
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.bias") == Shape{28672});
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.bias") == Shape{4096});
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{6144});
    REQUIRE(mlp.notes.size() == 1);
    CHECK(contains(mlp.notes[0], "linear_qkv and linear_proj"));
  }

  TEST_CASE("head_dim sets the attention's width where it is not hidden / heads") {
    // Mistral-Nemo: 32 heads x 128 = 4096 over a 5120 hidden size, 8 key/value heads.
    auto s = shapes(synth_config("mistral-nemo-12b"));
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{6144, 5120});
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.weight") == Shape{5120, 4096});
    // Llama-3.2-1B: 32 heads x 64, tied embeddings.
    s = shapes(synth_config("llama3.2-1b"));
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{3072, 2048});
    CHECK(s.count("output_layer.weight") == 0);
    // Phi-4: 40 heads and 10 key/value heads of 128.
    s = shapes(synth_config("phi4"));
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{7680, 5120});
  }

  TEST_CASE("Llama-Nemotron: each block's attention and MLP, from block_configs") {
    // Super-49B: 64 heads / 8 per group = 8 key/value heads; an MLP of ffn_mult 2.625 is
    // int(2 x 2.625 x 8192 / 3) = 14336, already a multiple of 256.
    const json super_config = shipped("llama3.3-nemotron-super-49b");
    const SynthModel super_model = synth_json(super_config);
    auto s = shapes(super_model);
    REQUIRE(super_config.at("block_configs")[0].at("ffn").at("ffn_mult") == 2.625);
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{10240, 8192});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == Shape{28672, 8192});
    std::size_t no_attention = 0;
    while (!super_config.at("block_configs")[no_attention].at("attention").at("no_op")) {
      ++no_attention;
    }
    const std::string layer = "decoder.layers." + std::to_string(no_attention) + ".";
    CHECK(names_under(super_model, layer) ==
          std::vector<std::string>{"mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.weight",
                                   "mlp.linear_fc2.weight"});

    // Ultra-253B's first block: ffn_mult 0.4875 -> int(5324.8) = 5324 -> 5376 (21 x 256);
    // 128 heads / 16 per group = 8 key/value heads.
    const json ultra_config = shipped("llama3.1-nemotron-ultra-253b");
    REQUIRE(ultra_config.at("block_configs")[0].at("ffn").at("ffn_mult") == 0.4875);
    const SynthModel ultra = synth_json(ultra_config);
    s = shapes(ultra);
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == Shape{10752, 16384});
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{18432, 16384});
    std::size_t no_mlp = 0;
    while (!ultra_config.at("block_configs")[no_mlp].at("ffn").at("no_op")) ++no_mlp;
    CHECK(names_under(ultra, "decoder.layers." + std::to_string(no_mlp) + ".mlp.").empty());

    // A block replaced by linear layers: Megatron-LM's TELayerNormColumnParallelLinear as the
    // whole self_attention / mlp, h -> h, split by tp.
    json replaced = super_config;
    replaced["block_configs"][0]["attention"]["replace_with_linear"] = true;
    replaced["block_configs"][0]["ffn"]["replace_with_linear"] = true;
    SynthOptions tp2;
    tp2.tp = 2;
    const SynthModel linear = synth_json(replaced, tp2);
    CHECK(names_under(linear, "decoder.layers.0.") ==
          std::vector<std::string>{"self_attention.layer_norm_weight", "self_attention.weight",
                                   "mlp.layer_norm_weight", "mlp.weight"});
    CHECK(shapes(linear).at("decoder.layers.0.mlp.weight") == Shape{4096, 8192});

    json bad = super_config;
    bad["block_configs"][0]["attention"]["n_heads_in_group"] = 7;
    CHECK(synth_error(bad) ==
          "config.json: /block_configs/0/attention/n_heads_in_group: 7 does "
          "not divide num_attention_heads 64");
    bad = super_config;
    bad["block_configs"].erase(0);
    CHECK(synth_error(bad) ==
          "config.json: /block_configs: has 79 blocks, and num_hidden_layers is 80");
  }

  TEST_CASE("Gemma: head_dim 256, tied; Gemma 2 and 3 normalize attention and MLP outputs") {
    auto s = shapes(synth_config("gemma-7b"));
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{12288, 3072});
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.weight") == Shape{3072, 4096});
    CHECK(s.count("output_layer.weight") == 0);
    // Gemma 2's four norms per layer: two fused into linear_qkv / linear_fc1, two as the
    // post_layernorm of linear_proj / linear_fc2 (Megatron-Bridge's TERowParallelLinearLayerNorm:
    // the linear's own weight first, then its child norm).
    CHECK(names_under(synth_config("gemma2-9b"), "decoder.layers.0.") ==
          std::vector<std::string>{
              "self_attention.linear_proj.weight",
              "self_attention.linear_proj.post_layernorm.weight",
              "self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.weight",
              "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.weight", "mlp.linear_fc2.weight",
              "mlp.linear_fc2.post_layernorm.weight"});
    s = shapes(synth_config("gemma3-12b-text"));
    CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{256});
    CHECK(s.at("decoder.layers.0.self_attention.k_layernorm.weight") == Shape{256});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc2.post_layernorm.weight") == Shape{3840});
  }

  TEST_CASE("Qwen2-MoE: q/k/v biases and a shared expert behind its gate") {
    const SynthModel m = synth_config("qwen1.5-moe-a2.7b");
    const auto s = shapes(m);
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{6144});
    CHECK(s.at("decoder.layers.0.mlp.router.weight") == Shape{60, 2048});
    CHECK(s.at("decoder.layers.0.mlp.experts.linear_fc1.weight59") == Shape{2816, 2048});
    CHECK(s.at("decoder.layers.0.mlp.shared_experts.gate_weight") == Shape{1, 2048});
    CHECK(s.at("decoder.layers.0.mlp.shared_experts.linear_fc1.weight") == Shape{11264, 2048});
    // SharedExpertMLP's own gate_weight comes before its children's params.
    CHECK(position(m, "decoder.layers.0.mlp.shared_experts.gate_weight") + 1 ==
          position(m, "decoder.layers.0.mlp.shared_experts.linear_fc1.weight"));
  }

  TEST_CASE("Qwen3-Next: gated delta net layers, gated full attention every fourth layer") {
    const SynthModel m = synth_config("qwen3-next-80b-a3b");
    const auto s = shapes(m);
    for (int layer = 0; layer < 48; ++layer) {
      CAPTURE(layer);
      const std::string p = "decoder.layers." + std::to_string(layer) + ".self_attention.";
      CHECK(s.count(p + "linear_qkv.weight") == (layer % 4 == 3 ? 1U : 0U));
      CHECK(s.count(p + "in_proj.weight") == (layer % 4 == 3 ? 0U : 1U));
    }
    // 16 query heads, their 16 output gates and 2 x 2 key/value heads, of 256.
    CHECK(s.at("decoder.layers.3.self_attention.linear_qkv.weight") == Shape{9216, 2048});
    CHECK(s.at("decoder.layers.3.self_attention.q_layernorm.weight") == Shape{256});
    // q and k: 16 heads x 128 each; v: 32 x 128; the conv over q, k and v; 32 dt and A.
    CHECK(s.at("decoder.layers.0.self_attention.in_proj.weight") == Shape{12352, 2048});
    CHECK(s.at("decoder.layers.0.self_attention.conv1d.weight") == Shape{8192, 1, 4});
    CHECK(s.at("decoder.layers.0.self_attention.A_log") == Shape{32});
    CHECK(s.at("decoder.layers.0.mlp.shared_experts.gate_weight") == Shape{1, 2048});

    // The same layers from newer configs' layer_types.
    json typed = shipped("qwen3-next-80b-a3b");
    typed.erase("full_attention_interval");
    typed["layer_types"] = json::array();
    for (int layer = 0; layer < 48; ++layer) {
      typed["layer_types"].push_back(layer % 4 == 3 ? "full_attention" : "linear_attention");
    }
    CHECK(shapes(synth_json(typed)) == s);
    typed["layer_types"][5] = "mamba";
    CHECK(synth_error(typed) ==
          "config.json: /layer_types/5: unknown layer type \"mamba\" "
          "(expected \"linear_attention\" or \"full_attention\")");
  }

  TEST_CASE("DeepSeek: MLA, first dense layers, shared experts, multi-token prediction") {
    const SynthModel m = synth_config("deepseek-v3");
    const auto s = shapes(m);
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == Shape{36864, 7168});
    CHECK(s.count("decoder.layers.2.mlp.router.weight") == 0);
    CHECK(s.at("decoder.layers.3.mlp.router.weight") == Shape{256, 7168});
    CHECK(s.at("decoder.layers.3.mlp.shared_experts.linear_fc1.weight") == Shape{4096, 7168});
    CHECK(s.at("decoder.layers.60.self_attention.linear_q_up_proj.weight") ==
          Shape{128 * 192, 1536});
    CHECK(s.at("decoder.layers.60.self_attention.linear_kv_down_proj.weight") == Shape{576, 7168});
    CHECK(s.count("decoder.layers.60.mlp.experts.linear_fc2.weight255") == 1);
    // num_nextn_predict_layers 1: one multi-token prediction layer, a copy of the last
    // (MoE) layer, between the decoder's final norm and the output layer.
    CHECK(s.at("mtp.layers.0.eh_proj.weight") == Shape{7168, 14336});
    CHECK(s.at("mtp.layers.0.mtp_model_layer.mlp.router.weight") == Shape{256, 7168});
    CHECK(position(m, "decoder.final_layernorm.weight") + 1 ==
          position(m, "mtp.layers.0.enorm.weight"));
    CHECK(m.params.back().name == "output_layer.weight");
    REQUIRE(m.notes.size() == 1);
    CHECK(contains(m.notes[0], "e_score_correction_bias"));

    // Kimi-K2 says DeepseekV3ForCausalLM with num_nextn_predict_layers 0: no such layers.
    const SynthModel none = synth_json(with("deepseek-v3", {{"num_nextn_predict_layers", 0}}));
    std::int64_t mtp = 0;
    for (const ChunkParam& p : m.params) mtp += p.name.rfind("mtp.", 0) == 0 ? p.numel() : 0;
    CHECK(none.numel() == m.numel() - mtp);
    CHECK(shapes(synth_json(with("deepseek-v3", {{"num_nextn_predict_layers", 2}})))
              .count("mtp.layers.1.final_layernorm.weight") == 1);

    // DeepSeek-V2-Lite's q_lora_rank null: no query compression, and with its q/k norms the
    // query projection fuses the input norm. An absent q_lora_rank is the config class's 1536.
    const json lite = with("deepseek-v3", {{"q_lora_rank", nullptr}, {"n_shared_experts", 2}});
    const auto l = shapes(synth_json(lite));
    CHECK(l.at("decoder.layers.0.self_attention.linear_q_proj.layer_norm_weight") == Shape{7168});
    CHECK(l.at("decoder.layers.0.self_attention.linear_q_proj.weight") == Shape{24576, 7168});
    CHECK(l.count("decoder.layers.0.self_attention.linear_q_down_proj.weight") == 0);
    CHECK(l.at("decoder.layers.3.mlp.shared_experts.linear_fc1.weight") == Shape{8192, 7168});
    json absent = shipped("deepseek-v3");
    absent.erase("q_lora_rank");
    absent["architectures"] = {"DeepseekV2ForCausalLM"};
    CHECK(shapes(synth_json(absent))
              .at("decoder.layers.0.self_attention.linear_q_down_proj.weight") ==
          Shape{1536, 7168});
  }

  TEST_CASE("GLM-4.5: q/k/v biases, optional q/k norms, first dense layers, MTP") {
    const SynthModel glm = synth_config("glm-4.7");
    auto s = shapes(glm);
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{14336});
    CHECK(s.count("decoder.layers.0.self_attention.linear_proj.bias") == 0);
    CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{128});
    CHECK(s.at("decoder.layers.2.mlp.linear_fc1.weight") == Shape{24576, 5120});
    CHECK(s.at("decoder.layers.3.mlp.router.weight") == Shape{160, 5120});
    CHECK(s.at("decoder.layers.3.mlp.shared_experts.linear_fc1.weight") == Shape{3072, 5120});
    CHECK(s.count("mtp.layers.0.mtp_model_layer.mlp.experts.linear_fc1.weight159") == 1);
    s = shapes(synth_config("glm-4.5-air"));
    CHECK(s.count("decoder.layers.0.self_attention.q_layernorm.weight") == 0);
    CHECK(s.at("decoder.layers.1.mlp.router.weight") == Shape{128, 4096});
  }

  TEST_CASE("OLMoE: q/k norms over all heads, whole at any tp") {
    SynthOptions tp2;
    tp2.tp = 2;
    for (const SynthModel& m : {synth_config("olmoe-1b-7b"), synth_config("olmoe-1b-7b", tp2)}) {
      const auto s = shapes(m);
      CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{2048});
      CHECK(s.at("decoder.layers.0.self_attention.k_layernorm.weight") == Shape{2048});
      CHECK(m.notes.empty());
    }
    // With fewer key/value heads Megatron-Bridge's key norm stays 16 heads wide, the
    // checkpoint's narrows: 16 layers x 8 heads x 128 more.
    const SynthModel grouped = synth_json(with("olmoe-1b-7b", {{"num_key_value_heads", 8}}));
    REQUIRE(grouped.notes.size() == 1);
    CHECK(contains(grouped.notes[0], "16,384 elements more"));
  }

  TEST_CASE("gpt-oss: learned attention sinks and biases on every linear and expert") {
    // A small config written here (no gpt-oss config.json is shipped): 8 heads of 16,
    // 2 key/value heads, 4 experts of 32.
    const json config = {{"architectures", {"GptOssForCausalLM"}},
                         {"hidden_size", 64},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 2},
                         {"head_dim", 16},
                         {"intermediate_size", 32},
                         {"num_local_experts", 4},
                         {"vocab_size", 1000},
                         {"attention_bias", true},
                         {"layer_types", {"sliding_attention", "full_attention"}}};
    SynthOptions tp2;
    tp2.tp = 2;
    const SynthModel m = synth_json(config, tp2);
    check_splits(config, 2, 4);
    CHECK(names_under(m, "decoder.layers.0.") ==
          std::vector<std::string>{"self_attention.core_attention.softmax_offset",
                                   "self_attention.linear_proj.weight",
                                   "self_attention.linear_proj.bias",
                                   "self_attention.linear_qkv.layer_norm_weight",
                                   "self_attention.linear_qkv.weight",
                                   "self_attention.linear_qkv.bias",
                                   "pre_mlp_layernorm.weight",
                                   "mlp.router.weight",
                                   "mlp.router.bias",
                                   "mlp.experts.linear_fc1.weight0",
                                   "mlp.experts.linear_fc1.bias0",
                                   "mlp.experts.linear_fc1.weight1",
                                   "mlp.experts.linear_fc1.bias1",
                                   "mlp.experts.linear_fc1.weight2",
                                   "mlp.experts.linear_fc1.bias2",
                                   "mlp.experts.linear_fc1.weight3",
                                   "mlp.experts.linear_fc1.bias3",
                                   "mlp.experts.linear_fc2.weight0",
                                   "mlp.experts.linear_fc2.bias0",
                                   "mlp.experts.linear_fc2.weight1",
                                   "mlp.experts.linear_fc2.bias1",
                                   "mlp.experts.linear_fc2.weight2",
                                   "mlp.experts.linear_fc2.bias2",
                                   "mlp.experts.linear_fc2.weight3",
                                   "mlp.experts.linear_fc2.bias3"});
    const auto s = shapes(m);
    CHECK(s.at("decoder.layers.0.self_attention.core_attention.softmax_offset") == Shape{4});
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.bias") == Shape{96});
    CHECK(s.at("decoder.layers.0.mlp.experts.linear_fc1.bias0") == Shape{32});
    CHECK(s.count("output_layer.weight") == 1);
  }

  TEST_CASE("Nemotron-H: one Mamba mixer, attention, MLP or MoE per layer of the pattern") {
    // A small config written here (no Nemotron-H config.json is shipped): Mamba with 4 heads
    // of 16 (inner 64), 2 groups of state 16; attention with 8 heads of 16, 2 key/value heads.
    json config = {{"architectures", {"NemotronHForCausalLM"}},
                   {"hidden_size", 64},
                   {"num_hidden_layers", 4},
                   {"hybrid_override_pattern", "M*-E"},
                   {"vocab_size", 512},
                   {"num_attention_heads", 8},
                   {"num_key_value_heads", 2},
                   {"head_dim", 16},
                   {"intermediate_size", 128},
                   {"mamba_num_heads", 4},
                   {"mamba_head_dim", 16},
                   {"n_groups", 2},
                   {"ssm_state_size", 16},
                   {"conv_kernel", 4},
                   {"n_routed_experts", 4},
                   {"moe_intermediate_size", 32},
                   {"moe_shared_expert_intermediate_size", 64}};
    const SynthModel m = synth_json(config);
    auto s = shapes(m);
    CHECK(names_under(m, "decoder.layers.0.") ==
          std::vector<std::string>{"mixer.conv1d_weight", "mixer.conv1d_bias", "mixer.dt_bias",
                                   "mixer.A_log", "mixer.D", "mixer.in_proj.layer_norm_weight",
                                   "mixer.in_proj.weight", "mixer.norm.weight",
                                   "mixer.out_proj.weight"});
    // conv over x, B and C: 64 + 2 x 2 x 16; in_proj: z and x, B and C, one dt per head.
    CHECK(s.at("decoder.layers.0.mixer.conv1d_weight") == Shape{128, 1, 4});
    CHECK(s.at("decoder.layers.0.mixer.in_proj.weight") == Shape{196, 64});
    CHECK(s.at("decoder.layers.1.self_attention.linear_qkv.weight") == Shape{192, 64});
    CHECK(s.at("decoder.layers.2.mlp.linear_fc1.weight") == Shape{128, 64});  // no gate
    CHECK(s.at("decoder.layers.3.mlp.experts.linear_fc1.weight3") == Shape{32, 64});
    CHECK(s.at("decoder.layers.3.mlp.shared_experts.linear_fc1.weight") == Shape{64, 64});
    CHECK(s.count("decoder.final_norm.weight") == 1);
    CHECK(s.count("embedding.position_embeddings.weight") == 0);

    // Latent experts, and a repeated multi-token prediction layer of its own pattern.
    config["moe_latent_size"] = 16;
    config["num_nextn_predict_layers"] = 2;
    config["mtp_hybrid_override_pattern"] = "*E";
    const SynthModel latent = synth_json(config);
    s = shapes(latent);
    CHECK(s.at("decoder.layers.3.mlp.fc1_latent_proj.weight") == Shape{16, 64});
    CHECK(s.at("decoder.layers.3.mlp.fc2_latent_proj.weight") == Shape{64, 16});
    CHECK(s.at("decoder.layers.3.mlp.experts.linear_fc1.weight0") == Shape{32, 16});
    CHECK(s.at("decoder.layers.3.mlp.experts.linear_fc2.weight0") == Shape{16, 32});
    CHECK(s.count("mtp.layers.0.mtp_model_layer.layers.1.mlp.router.weight") == 1);
    CHECK(s.count("mtp.layers.1.enorm.weight") == 0);

    check_splits(config, 2, 4);
    SynthOptions tp8;
    tp8.tp = 8;
    CHECK(synth_error(config, tp8) == "config.json: --tp 8 does not divide the 4 Mamba heads");
    json bad = config;
    bad["conv_kernel"] = 3;
    CHECK(synth_error(bad) ==
          "config.json: /conv_kernel: is 3, and Megatron-LM's Mamba mixer "
          "convolves over 4");
    bad = config;
    bad["hybrid_override_pattern"] = "M*-G";
    CHECK(contains(synth_error(bad), "/hybrid_override_pattern: unknown layer type 'G' at 3"));
    bad = config;
    bad["num_hidden_layers"] = 5;
    CHECK(
        contains(synth_error(bad), "/num_hidden_layers: is 5, and hybrid_override_pattern has 4"));
  }

  TEST_CASE("a field that would change the params and that the mapping does not read is refused") {
    CHECK(synth_error(with("llama3-8b", {{"moe_intermediate_size", 2048}})) ==
          "config.json: /moe_intermediate_size: changes the params of a model, and the "
          "LlamaForCausalLM mapping does not read it; remove it if the model does not use it");
    CHECK(contains(synth_error(with("gpt2", {{"head_dim", 64}})), "/head_dim: changes the params"));
    CHECK(contains(synth_error(with("mixtral-8x7b", {{"n_shared_experts", 1}})),
                   "/n_shared_experts: changes the params"));
    CHECK(contains(synth_error(with("deepseek-v3", {{"attention_bias", true}})),
                   "/attention_bias: changes the params"));
    CHECK(contains(synth_error(with("qwen3-8b", {{"layer_types", {"linear_attention"}}})),
                   "/layer_types: changes the params"));
    // Unset values, and sliding-window layers, change nothing.
    const std::int64_t llama = synth_config("llama3-8b").numel();
    CHECK(synth_json(with("llama3-8b", {{"num_experts", 0},
                                        {"mlp_only_layers", json::array()},
                                        {"layer_types", {"sliding_attention", "full_attention"}},
                                        {"sliding_window", 4096}}))
              .numel() == llama);
  }
}
