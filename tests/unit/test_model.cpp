// The chunk builder against Megatron-LM's module rules, each expectation worked out by hand
// from the module code: which chunk holds the embedding and output copies, when experts are
// reduced apart, the order TE registers params in, MLA's fused norms, Mamba and gated delta
// net shapes, and the splits Megatron-LM refuses.
#include <doctest/doctest.h>

#include <map>

#include "paramlayout/model_chunk.hpp"

using namespace paramlayout;

namespace {

/// A small GPT: 4 layers, hidden 64, 4 heads, vocab 1000 (padded to 1024).
ModelSpec small_gpt() {
  ModelSpec m;
  m.hidden_size = 64;
  m.ffn_hidden_size = 256;
  m.num_attention_heads = 4;
  m.vocab_size = 1000;
  m.position_embedding = PositionEmbedding::rope;
  m.layers.assign(4, LayerSpec{});
  return m;
}

ChunkPlacement placement(std::vector<std::int64_t> layers, bool pre, bool post, bool pp,
                         std::vector<std::int64_t> mtp = {}) {
  ChunkPlacement p;
  p.layers = std::move(layers);
  p.pre_process = pre;
  p.post_process = post;
  p.final_norm = post;
  p.pipeline_parallel = pp;
  p.mtp_layers = std::move(mtp);
  return p;
}

std::vector<std::string> names(const ModelChunk& chunk) {
  std::vector<std::string> out;
  for (const ChunkParam& p : chunk.params) out.push_back(p.name);
  return out;
}

const ChunkParam& find(const ModelChunk& chunk, const std::string& name) {
  for (const ChunkParam& p : chunk.params) {
    if (p.name == name) return p;
  }
  FAIL("no param " << name);
  static ChunkParam none;
  return none;
}

bool has(const ModelChunk& chunk, const std::string& name) {
  for (const ChunkParam& p : chunk.params) {
    if (p.name == name) return true;
  }
  return false;
}

using Shape = std::vector<std::int64_t>;

}  // namespace

TEST_SUITE("model") {
  TEST_CASE("a dense layer with the TE spec: norms fused, linear_proj before linear_qkv") {
    ModelSpec m = small_gpt();
    m.layers.resize(1);
    const ModelChunk c = build_chunk(m, {}, placement({0}, true, true, false));
    // LayerNorm (Megatron-LM's default) has biases; add_bias_linear is on by default; tied
    // embeddings on one stage: no output_layer.weight.
    CHECK(names(c) ==
          std::vector<std::string>{
              "embedding.word_embeddings.weight",
              "decoder.layers.0.self_attention.linear_proj.weight",
              "decoder.layers.0.self_attention.linear_proj.bias",
              "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight",
              "decoder.layers.0.self_attention.linear_qkv.layer_norm_bias",
              "decoder.layers.0.self_attention.linear_qkv.weight",
              "decoder.layers.0.self_attention.linear_qkv.bias",
              "decoder.layers.0.mlp.linear_fc1.layer_norm_weight",
              "decoder.layers.0.mlp.linear_fc1.layer_norm_bias",
              "decoder.layers.0.mlp.linear_fc1.weight", "decoder.layers.0.mlp.linear_fc1.bias",
              "decoder.layers.0.mlp.linear_fc2.weight", "decoder.layers.0.mlp.linear_fc2.bias",
              "decoder.final_layernorm.weight", "decoder.final_layernorm.bias"});
    CHECK(find(c, "embedding.word_embeddings.weight").shape == Shape{1024, 64});
    CHECK(find(c, "decoder.layers.0.self_attention.linear_qkv.weight").shape == Shape{192, 64});
  }

  TEST_CASE("embedding and output copies across stages, with and without MTP") {
    ModelSpec m = small_gpt();
    const auto flags = [](const ModelChunk& c, const std::string& name) {
      const ChunkParam& p = find(c, name);
      return std::pair(p.embedding_or_output, p.shared_embedding);
    };
    SUBCASE("tied, one stage: the output layer reuses the embedding") {
      const ModelChunk c = build_chunk(m, {}, placement({0, 1, 2, 3}, true, true, false));
      CHECK_FALSE(has(c, "output_layer.weight"));
      CHECK(flags(c, "embedding.word_embeddings.weight") == std::pair(true, false));
    }
    SUBCASE("tied, two stages: a copy on each edge, both shared") {
      const ModelChunk first = build_chunk(m, {}, placement({0, 1}, true, false, true));
      const ModelChunk last = build_chunk(m, {}, placement({2, 3}, false, true, true));
      CHECK(flags(first, "embedding.word_embeddings.weight") == std::pair(true, true));
      CHECK_FALSE(has(last, "embedding.word_embeddings.weight"));
      CHECK(flags(last, "output_layer.weight") == std::pair(true, true));
    }
    SUBCASE("untied, two stages: nothing shared") {
      m.untie_embeddings_and_output_weights = true;
      const ModelChunk first = build_chunk(m, {}, placement({0, 1}, true, false, true));
      const ModelChunk last = build_chunk(m, {}, placement({2, 3}, false, true, true));
      CHECK(flags(first, "embedding.word_embeddings.weight") == std::pair(true, false));
      CHECK(flags(last, "output_layer.weight") == std::pair(true, false));
    }
    SUBCASE("untied with MTP on the last stage: it gets a shared embedding copy too") {
      m.untie_embeddings_and_output_weights = true;
      m.mtp_num_layers = 1;
      const ModelChunk first = build_chunk(m, {}, placement({0, 1}, true, false, true));
      const ModelChunk last = build_chunk(m, {}, placement({2, 3}, false, true, true, {0}));
      CHECK(flags(first, "embedding.word_embeddings.weight") == std::pair(true, true));
      CHECK(flags(last, "embedding.word_embeddings.weight") == std::pair(true, true));
      CHECK(flags(last, "output_layer.weight") == std::pair(true, false));
      // Registration order: embedding, decoder, final norm, MTP, output layer.
      const std::vector<std::string> n = names(last);
      CHECK(n.front() == "embedding.word_embeddings.weight");
      CHECK(n.back() == "output_layer.weight");
      CHECK(has(last, "mtp.layers.0.eh_proj.weight"));
      CHECK(find(last, "mtp.layers.0.eh_proj.weight").shape == Shape{64, 128});
      CHECK(has(last, "mtp.layers.0.mtp_model_layer.mlp.linear_fc2.weight"));
    }
    SUBCASE("tied with MTP on the last stage: the output weight is allocated, not shared") {
      m.mtp_num_layers = 1;
      const ModelChunk last = build_chunk(m, {}, placement({2, 3}, false, true, true, {0}));
      CHECK(flags(last, "embedding.word_embeddings.weight") == std::pair(true, true));
      CHECK(flags(last, "output_layer.weight") == std::pair(true, false));
    }
  }

  TEST_CASE("experts: their own buffer only with ep > 1 or etp != tp") {
    ModelSpec m = small_gpt();
    m.normalization = Normalization::rms_norm;
    m.add_bias_linear = false;
    m.moe.num_experts = 4;
    m.moe.ffn_hidden_size = 32;
    for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
    const auto expert_flags = [&](TensorSplit s) {
      std::map<bool, int> out;
      for (const ChunkParam& p : build_chunk(m, s, placement({0}, false, false, false)).params) {
        if (p.name.find(".experts.") != std::string::npos)
          ++out[p.expert_parallel];
        else
          CHECK_FALSE(p.expert_parallel);
      }
      return out;
    };
    CHECK(expert_flags({1, 1, 1}) == std::map<bool, int>{{false, 8}});
    CHECK(expert_flags({2, 1, 2}) == std::map<bool, int>{{false, 8}});
    CHECK(expert_flags({1, 2, 1}) == std::map<bool, int>{{true, 4}});
    CHECK(expert_flags({2, 1, 1}) == std::map<bool, int>{{true, 8}});
  }

  TEST_CASE(
      "expert order: TE's grouped linears interleave weights and biases; "
      "SequentialMLP goes expert by expert; the shared gate comes first") {
    ModelSpec m = small_gpt();
    m.moe.num_experts = 2;
    m.moe.ffn_hidden_size = 32;
    for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
    const auto mlp_names = [&] {
      std::vector<std::string> out;
      for (const ChunkParam& p : build_chunk(m, {}, placement({0}, false, false, false)).params) {
        if (p.name.find(".mlp.") != std::string::npos) out.push_back(p.name.substr(17));
      }
      return out;
    };
    m.moe.grouped_gemm = true;
    CHECK(mlp_names() == std::vector<std::string>{
                             "mlp.router.weight", "mlp.router.bias",
                             "mlp.experts.linear_fc1.weight0", "mlp.experts.linear_fc1.bias0",
                             "mlp.experts.linear_fc1.weight1", "mlp.experts.linear_fc1.bias1",
                             "mlp.experts.linear_fc2.weight0", "mlp.experts.linear_fc2.bias0",
                             "mlp.experts.linear_fc2.weight1", "mlp.experts.linear_fc2.bias1"});
    m.moe.grouped_gemm = false;
    m.add_bias_linear = false;
    m.moe.shared_expert_size = 48;
    m.moe.shared_expert_gate = true;
    CHECK(mlp_names() ==
          std::vector<std::string>{
              "mlp.router.weight", "mlp.experts.local_experts.0.linear_fc1.weight",
              "mlp.experts.local_experts.0.linear_fc2.weight",
              "mlp.experts.local_experts.1.linear_fc1.weight",
              "mlp.experts.local_experts.1.linear_fc2.weight", "mlp.shared_experts.gate_weight",
              "mlp.shared_experts.linear_fc1.weight", "mlp.shared_experts.linear_fc2.weight"});
  }

  TEST_CASE("multi-latent attention: the up projections fuse norms only with qk_layernorm") {
    ModelSpec m = small_gpt();
    m.normalization = Normalization::rms_norm;
    m.add_bias_linear = false;
    m.mla = MlaSpec{32, 16, 8, 4, 8};
    m.layers.resize(1);
    const auto attention = [&] {
      std::vector<std::string> out;
      for (const ChunkParam& p : build_chunk(m, {}, placement({0}, false, false, false)).params) {
        if (p.name.find("mlp") == std::string::npos) out.push_back(p.name.substr(17));
      }
      return out;
    };
    CHECK(attention() == std::vector<std::string>{"input_layernorm.weight",
                                                  "self_attention.linear_proj.weight",
                                                  "self_attention.linear_q_down_proj.weight",
                                                  "self_attention.linear_q_up_proj.weight",
                                                  "self_attention.linear_kv_down_proj.weight",
                                                  "self_attention.linear_kv_up_proj.weight"});
    m.qk_layernorm = true;
    m.mla->q_lora_rank = 0;
    CHECK(attention() ==
          std::vector<std::string>{"input_layernorm.weight", "self_attention.linear_proj.weight",
                                   "self_attention.linear_q_proj.layer_norm_weight",
                                   "self_attention.linear_q_proj.weight",
                                   "self_attention.linear_kv_down_proj.weight",
                                   "self_attention.linear_kv_up_proj.layer_norm_weight",
                                   "self_attention.linear_kv_up_proj.weight"});
    const ModelChunk c = build_chunk(m, {2, 1, 2}, placement({0}, false, false, false));
    // heads 4 x (8 + 4) / tp 2; kv down: 16 + 4 rows, not split; kv up: 4 x (8 + 8) / 2.
    CHECK(find(c, "decoder.layers.0.self_attention.linear_q_proj.weight").shape == Shape{24, 64});
    CHECK(find(c, "decoder.layers.0.self_attention.linear_kv_down_proj.weight").shape ==
          Shape{20, 64});
    CHECK(find(c, "decoder.layers.0.self_attention.linear_kv_up_proj.weight").shape ==
          Shape{32, 16});
    CHECK(find(c, "decoder.layers.0.self_attention.linear_proj.weight").shape == Shape{64, 16});
  }

  TEST_CASE("a Mamba-2 mixer (Nemotron-H 8B's sizes): conv, dt, A, D first; in_proj not Muon") {
    ModelSpec m;
    m.hybrid = true;
    m.hidden_size = 4096;
    m.normalization = Normalization::rms_norm;
    m.vocab_size = 131072;
    m.mamba = MambaSpec{128, 64, 8, 128};
    m.layers = {{Mixer::mamba, Mlp::none}};
    const ModelChunk c = build_chunk(m, {2, 1, 2}, placement({0}, false, true, false));
    // d_inner = 128 heads x 64 = 8192; B and C: 8 groups x 128 states each.
    std::vector<std::pair<std::string, Shape>> got;
    for (const ChunkParam& p : c.params) got.emplace_back(p.name, p.shape);
    const std::string x = "decoder.layers.0.mixer.";
    CHECK(got == std::vector<std::pair<std::string, Shape>>{
                     {x + "conv1d_weight", {(8192 + 2 * 1024) / 2, 1, 4}},
                     {x + "conv1d_bias", {(8192 + 2 * 1024) / 2}},
                     {x + "dt_bias", {64}},
                     {x + "A_log", {64}},
                     {x + "D", {64}},
                     {x + "in_proj.layer_norm_weight", {4096}},
                     {x + "in_proj.weight", {(2 * 8192 + 2 * 1024 + 128) / 2, 4096}},
                     {x + "norm.weight", {4096}},
                     {x + "out_proj.weight", {4096, 4096}},
                     {"decoder.final_norm.weight", {4096}},
                     {"output_layer.weight", {65536, 4096}}});
    CHECK_FALSE(find(c, x + "in_proj.weight").use_muon);
  }

  TEST_CASE("gated delta net (Qwen3-Next's sizes) and an attention output gate") {
    ModelSpec m = small_gpt();
    m.hidden_size = 2048;
    m.normalization = Normalization::rms_norm;
    m.num_attention_heads = 16;
    m.num_query_groups = 2;
    m.kv_channels = 256;
    m.attention_output_gate = true;
    m.layers = {{Mixer::gated_delta_net, Mlp::none}, {Mixer::attention, Mlp::none}};
    const ModelChunk c = build_chunk(m, {}, placement({0, 1}, false, false, false));
    const std::string a = "decoder.layers.0.self_attention.";
    // q and k: 16 x 128 each; v: 32 x 128; gates b and a: one per value head.
    CHECK(find(c, a + "in_proj.weight").shape == Shape{2 * 2048 + 2 * 4096 + 2 * 32, 2048});
    CHECK(find(c, a + "conv1d.weight").shape == Shape{2 * 2048 + 4096, 1, 4});
    CHECK(find(c, a + "out_norm.weight").shape == Shape{128});
    CHECK(find(c, a + "out_proj.weight").shape == Shape{2048, 4096});
    // The gate adds a query-sized block to linear_qkv: (16 + 16 + 2 x 2) heads of 256.
    CHECK(find(c, "decoder.layers.1.self_attention.linear_qkv.weight").shape ==
          Shape{36 * 256, 2048});
  }

  TEST_CASE("splits Megatron-LM refuses, named as it names them") {
    ModelSpec m = small_gpt();
    CHECK(split_problem(m, {3, 1, 3}) == "tp 3 does not divide the 4 attention heads");
    m.num_query_groups = 2;
    CHECK(split_problem(m, {4, 1, 4}) == std::nullopt);  // tp a multiple of the kv heads
    m.num_attention_heads = 8;
    m.num_query_groups = 4;
    m.ffn_hidden_size = 250;
    CHECK(split_problem(m, {4, 1, 4}) == "tp 4 does not divide the MLP size 250");
    m.ffn_hidden_size = 256;
    CHECK(split_problem(m, {1, 2, 1}) == "ep 2 needs a mixture-of-experts model");
    m.moe.num_experts = 6;
    m.moe.ffn_hidden_size = 96;
    m.layers[1].mlp = Mlp::moe;
    CHECK(split_problem(m, {1, 4, 1}) == "ep 4 does not divide the 6 experts");
    CHECK(split_problem(m, {1, 2, 64}) == "etp 64 does not divide the expert MLP size 96");
  }

  TEST_CASE("the vocab is padded to a multiple of 128 x tp") {
    ModelSpec m = small_gpt();
    m.vocab_size = 128256;
    CHECK(padded_vocab_size(m, 1) == 128256);
    CHECK(padded_vocab_size(m, 8) == 129024);
    m.vocab_size = 50257;
    CHECK(padded_vocab_size(m, 1) == 50304);
  }
}
