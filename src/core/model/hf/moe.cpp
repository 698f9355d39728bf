// Mixture-of-experts families with their own bridges: DeepSeek-V2 / V3 and Kimi-K2, GLM-4.7-Flash,
// GLM-4.5, OLMoE and gpt-oss.
#include <fmt/format.h>

#include <algorithm>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {
namespace {

/// Multi-latent attention, routed experts of `moe_intermediate_size` plus one shared MLP of
/// n_shared_experts x that size, and multi-token prediction layers.
void read_mla_moe(Config& c, ModelSpec& m, std::int64_t shared_default) {
  read_llama_like(c, m);
  read_mla(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  // transformers 5 also writes num_experts (GlmMoeDsaConfig).
  m.moe.num_experts = integer_of(c, {"n_routed_experts", "num_experts"});
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  m.moe.shared_expert_size =
      m.moe.ffn_hidden_size * c.integer("n_shared_experts", shared_default, 0);
}

}  // namespace

/// DeepSeek-V2 / V3 and Kimi-K2: a dense MLP on the first `first_k_dense_replace` layers, then the
/// experts; the router's expert bias with `noaux_tc` routing.
void map_deepseek(Config& c, ModelSpec& m, Notes& notes) {
  read_mla_moe(c, m, /*shared_default=*/0);
  read_first_dense_moe_layers(c, m);
  note_q_proj_norm(m, notes);
  if (c.string("topk_method", "") == "noaux_tc") note_expert_bias(m, notes);
}

/// GLM-4.7-Flash: DeepSeek-V3's layers with one shared expert by default, its first
/// `first_k_dense_replace` layers dense (one when absent) or those `mlp_layer_types` calls "dense",
/// and always the router's expert bias.
void map_glm4_moe_lite(Config& c, ModelSpec& m, Notes& notes) {
  read_mla_moe(c, m, /*shared_default=*/1);
  read_dense_or_moe_layers(c, m, /*first_dense_default=*/1);
  note_expert_bias(m, notes);
}

/// GLM-5: GLM-4.7-Flash's layers under DeepSeek sparse attention (DSA): an indexer of
/// `index_n_heads` x `index_head_dim` in every layer that computes its own top-k (every
/// `index_topk_freq`-th after `index_skip_topk_offset`, as Megatron-LM's
/// is_dsa_skip_topk_layer counts); the rotary head part is qk_head_dim - qk_nope_head_dim;
/// Megatron-Bridge builds no multi-token prediction layers.
void map_glm_moe_dsa(Config& c, ModelSpec& m, Notes& notes) {
  read_mla_moe(c, m, /*shared_default=*/1);
  read_dense_or_moe_layers(c, m, /*first_dense_default=*/3);
  if (c.has("qk_head_dim")) {
    const std::int64_t qk = c.integer("qk_head_dim");
    if (qk <= m.mla->qk_head_dim) {
      c.fail("qk_head_dim",
             fmt::format("is {}, not above qk_nope_head_dim {}", qk, m.mla->qk_head_dim));
      return;
    }
    m.mla->qk_pos_emb_head_dim = qk - m.mla->qk_head_dim;
  }
  if (m.mtp_num_layers > 0) {
    notes.push_back(
        fmt::format("num_nextn_predict_layers {}: Megatron-Bridge's GLM-5 bridge "
                    "builds no multi-token prediction layers",
                    m.mtp_num_layers));
    m.mtp_num_layers = 0;
  }
  DsaSpec dsa;
  dsa.index_heads = c.integer("index_n_heads", 64, 1);
  dsa.index_head_dim = c.integer("index_head_dim", 128, 1);
  m.dsa = dsa;
  const std::int64_t freq = c.integer("index_topk_freq", 1, 1);
  const std::int64_t offset = std::max<std::int64_t>(c.integer("index_skip_topk_offset", 0, 0), 1);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto number = static_cast<std::int64_t>(i) + 1;
    m.layers[i].shares_topk = freq > 1 && std::max<std::int64_t>(number - offset, 0) % freq != 0;
  }
  // transformers 5 names the sparse attention "deepseek_sparse_attention" (GlmMoeDsaConfig).
  for (const std::string& type : c.strings("layer_types")) {
    if (type != "indexed_attention" && type != "deepseek_sparse_attention") {
      c.fail("layer_types", fmt::format("names \"{}\"; Megatron-Bridge builds every GLM-5 layer "
                                        "with sparse (\"indexed_attention\") attention",
                                        type));
      return;
    }
  }
  std::int64_t shared = 0;
  for (const std::string& type : c.strings("indexer_types")) shared += type == "shared" ? 1 : 0;
  if (shared > 0 && freq == 1) {
    notes.push_back(
        fmt::format("indexer_types: {} layers share another's indexer in the checkpoint, and "
                    "Megatron-Bridge builds an indexer on every layer (index_topk_freq 1)",
                    shared));
  }
  note_expert_bias(m, notes);
}

/// GLM-4.5: biases on q, k and v only (add_qkv_bias), optional q/k norms, a shared expert
/// of n_shared_experts x moe_intermediate_size, the router's expert bias.
void map_glm4_moe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.add_qkv_bias = c.boolean("attention_bias", false);
  m.qk_layernorm = c.boolean("use_qk_norm", false);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("n_routed_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("n_shared_experts", 1, 0);
  read_first_dense_moe_layers(c, m, /*first_dense_default=*/1);
  note_expert_bias(m, notes);
}

/// OLMoE: every layer a mixture of `num_experts` experts of `intermediate_size`, with q/k
/// norms over all heads (Megatron-Bridge's OLMoESelfAttention).
void map_olmoe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  read_biases(c, m, notes);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_experts");
  m.moe.ffn_hidden_size = m.ffn_hidden_size;
  for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
  m.qk_layernorm = true;
  m.qk_layernorm_all_heads = true;
  const std::int64_t groups = m.query_groups(LayerSpec{});
  if (groups != m.num_attention_heads) {
    notes.push_back(fmt::format(
        "k_layernorm: Megatron-Bridge normalizes keys over all {} heads, the checkpoint over "
        "the {} key/value heads: {} elements more than the checkpoint",
        m.num_attention_heads, groups,
        group_digits(m.num_layers() * (m.num_attention_heads - groups) * m.head_dim())));
  }
}

/// gpt-oss: every layer a mixture of `num_local_experts` experts of `intermediate_size`
/// with biases (add_bias_linear: router, experts, linear_proj), q/k/v biases, and a learned
/// attention sink per head (softmax_offset).
void map_gpt_oss(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_local_experts");
  m.moe.ffn_hidden_size = m.ffn_hidden_size;
  for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
  m.add_bias_linear = true;
  m.add_qkv_bias = c.boolean("attention_bias", true);
  m.softmax_offset = true;
}

}  // namespace paramlayout::hf
