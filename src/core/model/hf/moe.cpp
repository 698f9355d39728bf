// Mixture-of-experts families with their own bridges: DeepSeek-V2 / V3 (and Kimi-K2, which
// says DeepseekV3ForCausalLM), GLM-4.5, OLMoE and gpt-oss.
#include <fmt/format.h>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {

/// Multi-latent attention with its up-projection norms, a dense MLP on the first
/// `first_k_dense_replace` layers, routed experts plus one shared MLP of
/// n_shared_experts x moe_intermediate_size, and multi-token prediction layers. An absent
/// q_lora_rank takes the config classes' 1536; null means no query compression.
void map_deepseek(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  MlaSpec mla;
  mla.q_lora_rank = c.is_null("q_lora_rank") ? 0 : c.integer("q_lora_rank", 1536, 1);
  mla.kv_lora_rank = c.integer("kv_lora_rank", 512, 1);
  mla.qk_head_dim = c.integer("qk_nope_head_dim", 128, 1);
  mla.qk_pos_emb_head_dim = c.integer("qk_rope_head_dim", 64, 1);
  mla.v_head_dim = c.integer("v_head_dim", 128, 1);
  m.mla = mla;
  m.qk_layernorm = true;  // q_a_layernorm and kv_a_layernorm, fused into the up projections
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("n_routed_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("n_shared_experts", 0, 0);
  read_first_dense_moe_layers(c, m);
  if (c.string("topk_method", "") == "noaux_tc") note_expert_bias(m, notes);
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
