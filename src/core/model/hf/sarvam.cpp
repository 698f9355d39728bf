// Sarvam's MoE (grouped-query attention) and MLA (multi-latent attention) models, as
// Megatron-Bridge's sarvam bridges and providers build them: q/k norms, a dense first
// `first_k_dense_replace` layers, then routed experts with a shared MLP of num_shared_experts x
// moe_intermediate_size and sigmoid routing with the router's expert bias; no biases, untied
// embeddings. The experts' names differ between the publisher's config (num_experts) and
// transformers' class (n_routed_experts): either is read.
#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

void read_sarvam_moe_layers(Config& c, ModelSpec& m, Notes& notes) {
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = integer_of(c, {"num_experts", "n_routed_experts"});
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  const std::int64_t shared = c.has("num_shared_experts") ? c.integer("num_shared_experts", 0)
                                                          : c.integer("n_shared_experts", 1, 0);
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * shared;
  read_dense_or_moe_layers(c, m, /*first_dense_default=*/1);
  note_expert_bias(m, notes);
}

/// The providers never bias linear_qkv and always untie the output layer.
void refuse_what_sarvam_does_not_build(Config& c, ModelSpec& m) {
  for (std::string_view key : {"attention_bias", "use_qkv_bias", "use_bias"}) {
    if (c.boolean(key, false)) {
      c.fail(key, "biases the attention, and Megatron-Bridge builds Sarvam without biases");
      return;
    }
  }
  if (!m.untie_embeddings_and_output_weights) {
    c.fail("tie_word_embeddings",
           "is true, and Megatron-Bridge's Sarvam providers untie the output layer");
  }
}

}  // namespace

void map_sarvam_moe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.qk_layernorm = true;
  if (!c.boolean("use_qk_norm", true)) {
    c.fail("use_qk_norm", "is false, and Megatron-Bridge's Sarvam MoE provider has q/k norms");
    return;
  }
  refuse_what_sarvam_does_not_build(c, m);
  read_sarvam_moe_layers(c, m, notes);
}

/// Megatron-Bridge's Sarvam MLA provider builds no query compression (q_lora_rank None).
void map_sarvam_mla(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  if (!c.is_null("q_lora_rank") && c.has("q_lora_rank")) {
    c.fail("q_lora_rank",
           "compresses the queries, and Megatron-Bridge's Sarvam MLA provider builds none "
           "(q_lora_rank None)");
    return;
  }
  read_mla(c, m);
  m.mla->q_lora_rank = 0;
  refuse_what_sarvam_does_not_build(c, m);
  read_sarvam_moe_layers(c, m, notes);
  note_q_proj_norm(m, notes);
}

}  // namespace paramlayout::hf
