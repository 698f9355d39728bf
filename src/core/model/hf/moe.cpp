// Mixture-of-experts families with their own bridges: DeepSeek-V2 / V3 and Kimi-K2, GLM-4.7-Flash,
// GLM-4.5, OLMoE and gpt-oss.
#include <fmt/format.h>

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
  m.moe.num_experts = c.integer("n_routed_experts");
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
