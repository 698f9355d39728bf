// The mappings of Megatron-Bridge's newer text decoders (MiniMax-M2, EXAONE 4 and EXAONE-MoE,
// Ling 2.0, Hunyuan 3, GLM-5, MiMo-V2-Flash, Step-3.5, Falcon-H1), multimodal language models
// (Ministral 3 among them), Gemma 4 and the refused DeepSeek-V4, param by param, on the shipped
// configs or on small configs written here (never stand-ins for a real model). Shapes are worked
// out by hand from the configs' sizes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "hf_test_configs.hpp"
#include "paramlayout/synth.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using namespace paramlayout::test::hf;
using paramlayout::test::synth_config;

TEST_SUITE("synth") {
  TEST_CASE("MiniMax-M2: full-dimension q/k norms split tp ways with the heads") {
    // 48 heads x 128 and 8 key/value heads x 128, from the shipped MiniMax-M2.5 config.
    const auto whole = shapes(synth_config("minimax-m2.5"));
    CHECK(whole.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{6144});
    CHECK(whole.at("decoder.layers.0.self_attention.k_layernorm.weight") == Shape{1024});
    SynthOptions tp8;
    tp8.tp = 8;
    const auto split = shapes(synth_config("minimax-m2.5", tp8));
    CHECK(split.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{768});
    CHECK(split.at("decoder.layers.0.self_attention.k_layernorm.weight") == Shape{128});
    // With fewer key/value heads than tp ranks, each rank holds one head's key norm.
    json two = with("minimax-m2.5", {{"num_key_value_heads", 2}});
    const auto few = shapes(synth_json(two, tp8));
    CHECK(few.at("decoder.layers.0.self_attention.k_layernorm.weight") == Shape{128});
    CHECK(contains(synth_error(with("minimax-m2.5", {{"shared_intermediate_size", 512}})),
                   "/shared_intermediate_size: adds a shared expert"));
  }

  TEST_CASE("EXAONE 4: post-norm only, no fused input norms; q/k norms over one head") {
    const SynthModel m = synth_config("exaone-4.0-1.2b");
    CHECK(names_under(m, "decoder.layers.0.") ==
          std::vector<std::string>{
              "self_attention.linear_proj.weight",
              "self_attention.linear_proj.post_layernorm.weight",
              "self_attention.linear_qkv.weight", "self_attention.q_layernorm.weight",
              "self_attention.k_layernorm.weight", "mlp.linear_fc1.weight", "mlp.linear_fc2.weight",
              "mlp.linear_fc2.post_layernorm.weight"});
    // 32 heads + 2 x 8 key/value heads, of 64.
    CHECK(shapes(m).at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{3072, 2048});
  }

  TEST_CASE("EXAONE-MoE: MoE where is_moe_layer says, shared expert, dense MTP layers") {
    const json config = {{"architectures", {"ExaoneMoEForCausalLM"}},
                         {"hidden_size", 64},
                         {"intermediate_size", 96},
                         {"moe_intermediate_size", 32},
                         {"num_hidden_layers", 3},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 16},
                         {"vocab_size", 256},
                         {"num_experts", 4},
                         {"num_shared_experts", 1},
                         {"is_moe_layer", {false, true, true}},
                         {"num_nextn_predict_layers", 1},
                         {"tie_word_embeddings", false}};
    const auto s = shapes(synth_json(config));
    CHECK(s.count("decoder.layers.0.mlp.linear_fc1.weight") == 1);
    CHECK(s.at("decoder.layers.1.mlp.router.weight") == Shape{4, 64});
    CHECK(s.at("decoder.layers.2.mlp.shared_experts.linear_fc1.weight") == Shape{64, 64});
    CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{16});
    // The multi-token prediction layer is dense although the last decoder layer is not.
    CHECK(s.at("mtp.layers.0.mtp_model_layer.mlp.linear_fc1.weight") == Shape{192, 64});
    CHECK(s.count("mtp.layers.0.mtp_model_layer.mlp.router.weight") == 0);
  }

  TEST_CASE("Ling 2.0 and Hunyuan 3: q/k norms, first dense layers, shared experts") {
    json ling = with("ling-mini-2.0", {{"num_shared_experts", 2}});
    const SynthModel l = synth_json(ling);
    // One shared expert of moe_intermediate_size, whatever num_shared_experts says (noted).
    CHECK(shapes(l).at("decoder.layers.1.mlp.shared_experts.linear_fc1.weight") ==
          Shape{1024, 2048});
    CHECK(contains(l.notes.front(), "num_shared_experts 2: Megatron-Bridge builds one shared"));
    const json hy = {{"architectures", {"HYV3ForCausalLM"}},
                     {"hidden_size", 64},
                     {"intermediate_size", 96},
                     {"moe_intermediate_size", 32},
                     {"num_hidden_layers", 3},
                     {"num_attention_heads", 4},
                     {"num_key_value_heads", 2},
                     {"head_dim", 16},
                     {"vocab_size", 256},
                     {"num_experts", 4},
                     {"num_shared_experts", 2},
                     {"mlp_layer_types", {"dense", "sparse", "dense"}}};
    const auto h = shapes(synth_json(hy));
    CHECK(h.at("decoder.layers.1.mlp.shared_experts.linear_fc1.weight") == Shape{128, 64});
    CHECK(h.count("decoder.layers.2.mlp.router.weight") == 0);
    CHECK(h.at("decoder.layers.2.self_attention.k_layernorm.weight") == Shape{16});
  }

  TEST_CASE("a multimodal config's language model is read from text_config") {
    const SynthModel m = synth_config("qwen3.5-35b-a3b");
    CHECK(contains(m.notes.front(), "the language model only (under text_config)"));
    // tie_word_embeddings is read from the top level, as Megatron-Bridge's VL bridges do.
    json tied = shipped("qwen3.5-35b-a3b");
    tied["tie_word_embeddings"] = true;
    CHECK(shapes(synth_json(tied)).count("output_layer.weight") == 0);
    json bare = shipped("qwen3.5-35b-a3b");
    bare.erase("text_config");
    CHECK(synth_error(bare) ==
          "config.json: missing required key \"text_config\" (the language model's config, "
          "for Qwen3_5MoeForConditionalGeneration)");
    json wrong = shipped("qwen3.5-35b-a3b");
    wrong["text_config"]["moe_latent_size"] = 64;
    CHECK(contains(synth_error(wrong), "/text_config/moe_latent_size: changes the params"));
  }

  TEST_CASE("Qwen3-VL-MoE and Gemma 3 multimodal: the language model as Qwen3-MoE and Gemma 3") {
    const json text = {
        {"hidden_size", 64},      {"intermediate_size", 96},  {"moe_intermediate_size", 32},
        {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
        {"head_dim", 16},         {"vocab_size", 256},        {"num_experts", 4}};
    const json vl = {{"architectures", {"Qwen3VLMoeForConditionalGeneration"}},
                     {"text_config", text},
                     {"vision_config", {{"depth", 27}}},
                     {"tie_word_embeddings", false}};
    const auto s = shapes(synth_json(vl));
    CHECK(s.at("decoder.layers.1.mlp.experts.linear_fc1.weight3") == Shape{64, 64});
    CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{16});
    CHECK(s.at("output_layer.weight") == Shape{256, 64});
    json gemma = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                  {"text_config", shipped("gemma3-1b")}};
    gemma["text_config"].erase("architectures");
    const SynthModel g = synth_json(gemma);
    CHECK(g.numel() == synth_config("gemma3-1b").numel());
  }

  TEST_CASE("GLM-5: sparse attention's indexer on the layers that compute their own top-k") {
    const SynthModel all = synth_config("glm-5");
    // Absorbed MLA: the indexer (core_attention's) first, unfused q/kv norms last.
    CHECK(names_under(all, "decoder.layers.0.self_attention.") ==
          std::vector<std::string>{
              "core_attention.indexer.linear_wq_b.weight",
              "core_attention.indexer.linear_wk.weight", "core_attention.indexer.k_norm.weight",
              "core_attention.indexer.k_norm.bias",
              "core_attention.indexer.linear_weights_proj.weight", "linear_proj.weight",
              "linear_q_down_proj.weight", "linear_q_up_proj.weight", "linear_kv_down_proj.weight",
              "linear_kv_up_proj.weight", "q_layernorm.weight", "kv_layernorm.weight"});
    // 32 indexer heads x 128 over q_lora_rank 2048, not split; 64 heads x (192 + 64) split.
    SynthOptions tp2;
    tp2.tp = 2;
    const auto s = shapes(synth_config("glm-5", tp2));
    CHECK(s.at("decoder.layers.0.self_attention.core_attention.indexer.linear_wq_b.weight") ==
          Shape{4096, 2048});
    CHECK(s.at("decoder.layers.0.self_attention.linear_q_up_proj.weight") == Shape{8192, 2048});
    // Every other layer from the third on reuses a top-k (layer numbers from 1, offset 2).
    const auto shared =
        shapes(synth_json(with("glm-5", {{"index_topk_freq", 2}, {"index_skip_topk_offset", 2}})));
    const auto indexer = [&](int layer) {
      return shared.count(fmt::format(
          "decoder.layers.{}.self_attention.core_attention.indexer.linear_wk.weight", layer));
    };
    CHECK(indexer(0) == 1);
    CHECK(indexer(1) == 1);
    CHECK(indexer(2) == 0);
    CHECK(indexer(3) == 1);
    CHECK(indexer(4) == 0);
  }

  TEST_CASE("MiMo-V2-Flash: per-layer key/value heads, sinks on sliding layers, narrower values") {
    const json config = {{"architectures", {"MiMoV2FlashForCausalLM"}},
                         {"hidden_size", 64},
                         {"intermediate_size", 96},
                         {"moe_intermediate_size", 32},
                         {"num_hidden_layers", 3},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"swa_num_key_value_heads", 4},
                         {"head_dim", 24},
                         {"v_head_dim", 16},
                         {"vocab_size", 256},
                         {"n_routed_experts", 4},
                         {"hybrid_layer_pattern", {0, 1, 1}},
                         {"moe_layer_freq", {0, 1, 1}},
                         {"num_nextn_predict_layers", 1}};
    const auto s = shapes(synth_json(config));
    // Full layer 0: 4 x 24 queries, 2 x (24 + 16) keys and values; no sink.
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{176, 64});
    CHECK(s.count("decoder.layers.0.self_attention.core_attention.softmax_offset") == 0);
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.weight") == Shape{64, 64});
    // Sliding layer 1: 4 key/value heads and a sink per head.
    CHECK(s.at("decoder.layers.1.self_attention.linear_qkv.weight") == Shape{256, 64});
    CHECK(s.at("decoder.layers.1.self_attention.core_attention.softmax_offset") == Shape{4});
    CHECK(s.at("decoder.layers.1.mlp.router.weight") == Shape{4, 64});
    // The multi-token prediction layer: dense, sliding-window attention.
    CHECK(s.at("mtp.layers.0.mtp_model_layer.self_attention.linear_qkv.weight") == Shape{256, 64});
    CHECK(s.at("mtp.layers.0.mtp_model_layer.mlp.linear_fc1.weight") == Shape{192, 64});
  }

  TEST_CASE("Qwen3.5 dense: Qwen3.5's gated delta net and gated attention over a dense MLP") {
    json text = shipped("qwen3.5-35b-a3b").at("text_config");
    for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "shared_expert_intermediate_size"}) {
      text.erase(key);
    }
    text["intermediate_size"] = 6144;
    text["architectures"] = {"Qwen3_5ForCausalLM"};
    const auto s = shapes(synth_json(text));
    // 16 heads of 256 with their output gates and 2 x 2 key/value heads: (32 + 4) x 256.
    CHECK(s.at("decoder.layers.3.self_attention.linear_qkv.weight") == Shape{9216, 2048});
    CHECK(s.at("decoder.layers.0.self_attention.in_proj.weight") == Shape{12352, 2048});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == Shape{12288, 2048});
    CHECK(s.at("mtp.layers.0.mtp_model_layer.mlp.linear_fc2.weight") == Shape{2048, 6144});
  }

  TEST_CASE("Step-3.5: sliding layers' own heads, full output gate, MoE by list, typed MTP") {
    const json config = {
        {"architectures", {"Step3p5ForCausalLM"}},
        {"hidden_size", 64},
        {"intermediate_size", 96},
        {"num_hidden_layers", 3},
        {"num_attention_heads", 4},
        {"num_attention_groups", 2},
        {"head_dim", 16},
        {"vocab_size", 256},
        {"moe_num_experts", 4},
        {"moe_intermediate_size", 32},
        {"share_expert_dim", 48},
        {"moe_layers_enum", "1,2"},
        {"num_nextn_predict_layers", 1},
        {"use_qk_norm", true},
        {"tie_word_embeddings", false},
        {"layer_types",
         {"full_attention", "sliding_attention", "full_attention", "sliding_attention"}},
        {"attention_other_setting",
         {{"attention_type", "sliding_attention"},
          {"num_attention_heads", 8},
          {"num_attention_groups", 2},
          {"head_dim", 8}}}};
    const auto s = shapes(synth_json(config));
    // Full layer 0: 4 heads x 16 and their gates (4 x 16), 2 x (16 + 16) keys and values.
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{192, 64});
    CHECK(s.at("decoder.layers.0.self_attention.q_layernorm.weight") == Shape{16});
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == Shape{192, 64});
    // Sliding layer 1: 8 heads x 8 and gates, 2 x (8 + 8); linear_proj reads 8 x 8.
    CHECK(s.at("decoder.layers.1.self_attention.linear_qkv.weight") == Shape{160, 64});
    CHECK(s.at("decoder.layers.1.self_attention.linear_proj.weight") == Shape{64, 64});
    CHECK(s.at("decoder.layers.1.self_attention.k_layernorm.weight") == Shape{8});
    CHECK(s.at("decoder.layers.1.mlp.router.weight") == Shape{4, 64});
    CHECK(s.at("decoder.layers.1.mlp.shared_experts.linear_fc1.weight") == Shape{96, 64});
    CHECK(s.at("decoder.layers.2.self_attention.linear_qkv.weight") == Shape{192, 64});
    // The MTP layer takes layer_types' fourth entry (sliding) and is dense.
    CHECK(s.at("mtp.layers.0.mtp_model_layer.self_attention.linear_qkv.weight") == Shape{160, 64});
    CHECK(s.at("mtp.layers.0.mtp_model_layer.mlp.linear_fc1.weight") == Shape{192, 64});
    // Over 3 pipeline stages Bridge's layer looks the MTP layer up 2 decoder layers further
    // (the last stage's offset), past layer_types' end: full attention there.
    SynthOptions last;
    last.pp = 3;
    last.stage = 2;
    CHECK(shapes(synth_json(config, last))
              .at("mtp.layers.0.mtp_model_layer.self_attention.linear_qkv.weight") ==
          Shape{192, 64});
    // tp 2 halves every layer's heads and gates.
    SynthOptions tp2;
    tp2.tp = 2;
    CHECK(shapes(synth_json(config, tp2)).at("decoder.layers.1.self_attention.linear_qkv.weight") ==
          Shape{80, 64});
    // Without the head-wise gate: no gate rows. Without attention_other_setting: Bridge's
    // defaults, 96 heads x 128 on sliding layers.
    json plain = config;
    plain["use_head_wise_attn_gate"] = false;
    CHECK(shapes(synth_json(plain)).at("decoder.layers.0.self_attention.linear_qkv.weight") ==
          Shape{128, 64});
    plain.erase("attention_other_setting");
    CHECK(shapes(synth_json(plain)).at("decoder.layers.1.self_attention.linear_qkv.weight") ==
          Shape{96 * 128 + 8 * 256, 64});
    json none = config;
    none["moe_layers_enum"] = nullptr;
    CHECK(contains(synth_error(none), "/moe_layers_enum: is null"));
    none["moe_layers_enum"] = "1,x";
    CHECK(contains(synth_error(none), "/moe_layers_enum: expected comma-separated"));
  }

  TEST_CASE("Ministral 3: the language model under text_config, its own tie_word_embeddings") {
    const SynthModel m = synth_config("ministral-3-8b");
    const auto s = shapes(m);
    // 32 heads x 128 and 2 x 8 key/value heads x 128 over 4096.
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{6144, 4096});
    // Per layer 218,112,000 (qkv, proj, fc1, fc2, two norms); embedding and output 131072 x 4096.
    CHECK(m.numel() == 34 * 218112000LL + 2 * 131072LL * 4096 + 4096);
    // Bridge reads the language model's tie_word_embeddings, not the top level's.
    json tied = shipped("ministral-3-8b");
    tied["tie_word_embeddings"] = true;
    CHECK(shapes(synth_json(tied)).count("output_layer.weight") == 1);
    tied["text_config"]["tie_word_embeddings"] = true;
    CHECK(shapes(synth_json(tied)).count("output_layer.weight") == 0);
  }

  TEST_CASE("Falcon-H1: a norm, Mamba-2 and attention side by side, then the MLP, every layer") {
    const SynthModel m = synth_config("falcon-h1-0.5b");
    CHECK(names_under(m, "decoder.layers.0.") ==
          std::vector<std::string>{
              "norm.weight", "mamba_mixer.conv1d_weight", "mamba_mixer.conv1d_bias",
              "mamba_mixer.dt_bias", "mamba_mixer.A_log", "mamba_mixer.D",
              "mamba_mixer.in_proj.weight", "mamba_mixer.out_proj.weight",
              "self_attention.linear_proj.weight", "self_attention.linear_qkv.weight",
              "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.weight",
              "mlp.linear_fc2.weight"});
    const auto s = shapes(m);
    // 24 Mamba heads x 64 = 1536 inner, 1 group x 128 states: conv over 1536 + 2 x 128.
    CHECK(s.at("decoder.layers.0.mamba_mixer.conv1d_weight") == Shape{1792, 1, 4});
    // z, x (1536 each), B, C (128 each) and dt (24).
    CHECK(s.at("decoder.layers.0.mamba_mixer.in_proj.weight") == Shape{3352, 1024});
    CHECK(s.at("decoder.layers.0.mamba_mixer.out_proj.weight") == Shape{1024, 1536});
    // 8 heads x 64 and 2 x 2 key/value heads x 64.
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{768, 1024});
    CHECK(s.count("decoder.final_norm.weight") == 1);
    // The gated norm where mamba_rms_norm says; a wider conv where mamba_d_conv says.
    const auto normed =
        shapes(synth_json(with("falcon-h1-0.5b", {{"mamba_rms_norm", true}, {"mamba_d_conv", 2}})));
    CHECK(normed.at("decoder.layers.0.mamba_mixer.norm.weight") == Shape{1536});
    CHECK(normed.at("decoder.layers.0.mamba_mixer.conv1d_weight") == Shape{1792, 1, 2});
    CHECK(contains(synth_error(with("falcon-h1-0.5b", {{"mamba_norm_before_gate", true}})),
                   "/mamba_norm_before_gate: is true"));
    CHECK(contains(synth_error(with("falcon-h1-0.5b", {{"mamba_conv_bias", false}})),
                   "/mamba_conv_bias: is false"));
    const SynthModel biased = synth_json(with("falcon-h1-0.5b", {{"mamba_proj_bias", true}}));
    // 36 x (3352 + 1024) in_proj and out_proj biases that Bridge does not build.
    CHECK(contains(biased.notes.back(), "157,536 checkpoint elements have no param"));
    // Megatron-LM splits the Mamba groups tp ways: two groups allow tp 2.
    SynthOptions tp2;
    tp2.tp = 2;
    const auto split = shapes(synth_json(with("falcon-h1-0.5b", {{"mamba_n_groups", 2}}), tp2));
    CHECK(split.at("decoder.layers.0.mamba_mixer.in_proj.weight") ==
          Shape{(3072 + 512 + 24) / 2, 1024});
  }

  TEST_CASE("Gemma 4 dense: local layer, output norms after the MLP, per-layer inputs") {
    // 6 layers, hidden 64, 4 heads of 16 over 2 key/value heads; layers 1 and 4 and the last
    // (forced so) global: 32 per head over 1 key/value head; the last 3 layers share keys and
    // values and have a double-wide MLP; per-layer inputs of 8 over 1,024 rows.
    const json config = {{"architectures", {"Gemma4ForCausalLM"}},
                         {"hidden_size", 64},
                         {"num_hidden_layers", 6},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 16},
                         {"global_head_dim", 32},
                         {"num_global_key_value_heads", 1},
                         {"intermediate_size", 96},
                         {"vocab_size", 1100},
                         {"vocab_size_per_layer_input", 1024},
                         {"hidden_size_per_layer_input", 8},
                         {"num_kv_shared_layers", 3},
                         {"use_double_wide_mlp", true},
                         {"tie_word_embeddings", false},
                         {"layer_types",
                          {"sliding_attention", "full_attention", "sliding_attention",
                           "sliding_attention", "full_attention", "sliding_attention"}}};
    const SynthModel m = synth_json(config);
    CHECK(names_under(m, "decoder.layers.0.") ==
          std::vector<std::string>{
              "input_layernorm.weight", "self_attention.linear_proj.weight",
              "self_attention.linear_qkv.weight", "self_attention.q_layernorm.weight",
              "self_attention.k_layernorm.weight", "pre_mlp_layernorm.weight",
              "mlp.linear_fc1.weight", "mlp.linear_fc2.weight", "post_self_attn_layernorm.weight",
              "post_mlp_layernorm.weight", "per_layer_input_gate.weight",
              "per_layer_projection.weight", "post_per_layer_input_norm.weight"});
    const auto s = shapes(m);
    // Sliding: (4 + 2 x 2) x 16 rows; global: (4 + 2 x 1) x 32.
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{128, 64});
    CHECK(s.at("decoder.layers.1.self_attention.linear_qkv.weight") == Shape{192, 64});
    CHECK(s.at("decoder.layers.1.self_attention.linear_proj.weight") == Shape{64, 128});
    CHECK(s.at("decoder.layers.1.self_attention.k_layernorm.weight") == Shape{32});
    CHECK(s.at("decoder.layers.5.self_attention.linear_qkv.weight") == Shape{192, 64});
    CHECK(s.at("decoder.layers.2.mlp.linear_fc1.weight") == Shape{192, 64});
    CHECK(s.at("decoder.layers.3.mlp.linear_fc1.weight") == Shape{384, 64});
    CHECK(s.at("decoder.layers.3.mlp.linear_fc2.weight") == Shape{64, 192});
    CHECK(s.at("decoder.layers.0.per_layer_input_gate.weight") == Shape{8, 64});
    // After the final norm, with tied embeddings whatever the config says; 6 x 8 channels.
    const auto n = static_cast<std::ptrdiff_t>(m.params.size());
    CHECK(position(m, "decoder.final_layernorm.weight") == n - 4);
    CHECK(position(m, "per_layer_embedding.weight") == n - 3);
    CHECK(s.at("per_layer_embedding.weight") == Shape{1024, 48});
    CHECK(s.at("per_layer_model_proj.weight") == Shape{48, 64});
    CHECK(s.at("per_layer_proj_norm.weight") == Shape{8});
    CHECK(s.count("output_layer.weight") == 0);
    // 1,100 padded to 1,152 (a multiple of 128, not of 128 x tp).
    CHECK(s.at("embedding.word_embeddings.weight") == Shape{1152, 64});
    // Hand count. Per layer: 5 norms of 64 and the per-layer gate and projection (2 x 8 x 64);
    // sliding attention (0, 2, 3): 64 x 64 + 128 x 64 + q/k norms 2 x 16; global (1, 4, 5):
    // 64 x 128 + 192 x 64 + 2 x 32; MLP 3 x 96 x 64, doubled on 3 to 5. Then the embedding
    // 1,152 x 64, the final norm, 1,024 x 48 + 48 x 64 + 8.
    const std::int64_t per_layer = 5 * 64 + 2 * 8 * 64;
    const std::int64_t sliding = 64 * 64 + 128 * 64 + 2 * 16;
    const std::int64_t global = 64 * 128 + 192 * 64 + 2 * 32;
    const std::int64_t mlp = 3 * 96 * 64;
    CHECK(m.numel() == 1152 * 64 + 6 * per_layer + 3 * sliding + 3 * global + 3 * mlp +
                           3 * 2 * mlp + 64 + 1024 * 48 + 48 * 64 + 8);
    // Every layer sharing: Bridge (as transformers) widens none.
    json all_shared = config;
    all_shared["num_kv_shared_layers"] = 6;
    CHECK(shapes(synth_json(all_shared)).at("decoder.layers.3.mlp.linear_fc1.weight") ==
          Shape{192, 64});
    SynthOptions tp2;
    tp2.tp = 2;
    const auto half = shapes(synth_json(config, tp2));
    CHECK(half.at("embedding.word_embeddings.weight") == Shape{576, 64});
    CHECK(half.at("per_layer_embedding.weight") == Shape{512, 48});
    CHECK(half.at("per_layer_model_proj.weight") == Shape{24, 64});
    CHECK(half.at("decoder.layers.0.per_layer_input_gate.weight") == Shape{8, 64});
    CHECK(half.at("decoder.layers.1.self_attention.linear_qkv.weight") == Shape{96, 64});
    SynthOptions pp2;
    pp2.pp = 2;
    CHECK(contains(synth_error(config, pp2), "Gemma 4 dense provider builds one pipeline stage"));
    SynthOptions tp3;
    tp3.tp = 3;
    json three = config;
    three["num_attention_heads"] = 6;
    three["num_key_value_heads"] = 3;
    three["num_global_key_value_heads"] = 3;
    three["vocab_size"] = 1200;
    CHECK(contains(synth_error(three, tp3), "tp 3 does not divide the padded vocabulary of 1280"));
    // The checkpoint leaves out the shared layers' (3 to 5) keys, values and key norms: layer 3
    // 2 x 2 x 16 x 64 + 16, layers 4 and 5 2 x 1 x 32 x 64 + 32 each; Bridge ties the embedding.
    std::string notes;
    for (const std::string& note : m.notes) notes += note + "\n";
    CHECK(contains(notes,
                   "num_kv_shared_layers 3: those layers keep Megatron-LM's whole "
                   "linear_qkv and k_layernorm"));
    CHECK(contains(notes, "12,368 elements more than the checkpoint"));
    CHECK(contains(notes,
                   "tie_word_embeddings false: Megatron-Bridge's Gemma 4 dense provider "
                   "ties"));
  }

  TEST_CASE("Gemma 4 MoE: the router's scales, the experts' own norms, global layers") {
    // The shipped 26B-A4B: hidden 2,816, 16 heads; sliding 256 over 8, global 512 over 2.
    const SynthModel m = synth_config("gemma-4-26b-a4b");
    CHECK(m.params.size() == 1 + 30 * (16 + 2 * 128) + 1);
    const auto s = shapes(m);
    CHECK(s.at("decoder.layers.0.self_attention.linear_qkv.weight") == Shape{8192, 2816});
    CHECK(s.at("decoder.layers.5.self_attention.linear_qkv.weight") == Shape{10240, 2816});
    CHECK(s.at("decoder.layers.5.self_attention.linear_proj.weight") == Shape{2816, 8192});
    CHECK(s.at("decoder.layers.5.self_attention.q_layernorm.weight") == Shape{512});
    CHECK(s.at("decoder.layers.0.mlp.router.per_expert_scale") == Shape{128});
    CHECK(s.at("decoder.layers.0.mlp.router.scale") == Shape{2816});
    CHECK(s.at("decoder.layers.0.mlp.shared_experts.linear_fc1.weight") == Shape{4224, 2816});
    std::vector<std::string> tail = names_under(m, "decoder.layers.29.");
    tail.erase(tail.begin(), tail.end() - 6);
    CHECK(tail == std::vector<std::string>{
                      "mlp.shared_experts.linear_fc1.weight",
                      "mlp.shared_experts.linear_fc2.weight", "mlp.post_moe_layernorm.weight",
                      "mlp.post_shared_expert_layernorm.weight",
                      "pre_shared_expert_layernorm.weight", "post_ffn_layernorm.weight"});
    CHECK(s.at("decoder.layers.0.self_attention.linear_proj.post_layernorm.weight") == Shape{2816});
    // Hand count: 262,144 x 2,816 embedding; per layer 7 norms of 2,816 and the q/k norms;
    // attention 2,816 x 4,096 + 8,192 x 2,816 (25 sliding) or 2,816 x 8,192 + 10,240 x 2,816
    // (5 global); router 129 x 2,816 + 128; 128 experts of 3 x 704 x 2,816; the shared expert
    // 3 x 2,112 x 2,816; the final norm.
    const std::int64_t h = 2816;
    const std::int64_t per_layer = 7 * h + 129 * h + 128 + 128 * 3 * 704 * h + 3 * 2112 * h;
    const std::int64_t attention =
        25 * (4096 * h + 8192 * h + 512) + 5 * (8192 * h + 10240 * h + 1024);
    CHECK(m.numel() == 262144 * h + 30 * per_layer + attention + h);
    CHECK(m.numel() == 25'247'559'680);
    CHECK(contains(m.notes.back(),
                   "attention_k_eq_v: global layers keep Megatron-LM's value "
                   "projection in linear_qkv"));
  }

  TEST_CASE("DeepSeek-V4 is refused, naming the attention Megatron-LM lacks") {
    CHECK(contains(synth_error(json{{"architectures", {"DeepseekV4ForCausalLM"}}}),
                   "/architectures/0: DeepseekV4ForCausalLM needs Megatron-LM's attention "
                   "variant \"dsv4_hybrid\""));
  }
}
