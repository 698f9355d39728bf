// EXAONE 4.0 and EXAONE-MoE (K-EXAONE), as Megatron-Bridge's exaone bridges build them. Their
// local/global attention patterns change no param.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {

/// EXAONE 4.0: post-norm only (its layer spec gives linear_qkv and linear_fc1 no input norm,
/// linear_proj and linear_fc2 a `post_layernorm`), q/k norms over one head, no biases.
void map_exaone4(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.qk_layernorm = true;
  m.pre_linear_norms = false;
  m.post_linear_norms = true;
}

/// EXAONE-MoE: pre-norm layers with q/k norms; MoE where `mlp_layer_types` says "sparse" (or
/// `is_moe_layer`, or after `first_k_dense_replace`), routed experts with a shared MLP of
/// num_shared_experts x moe_intermediate_size and the router's expert bias; its multi-token
/// prediction layers are dense (Megatron-Bridge's spec keeps them so), one physical layer when it
/// is repeated.
void map_exaone_moe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.qk_layernorm = true;
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("num_shared_experts", 0);
  if (c.has("mlp_layer_types")) {
    read_dense_or_moe_layers(c, m, 0);
  } else if (c.has("is_moe_layer")) {
    const std::vector<bool> flags = c.booleans("is_moe_layer");
    if (flags.size() != m.layers.size()) {
      c.fail("is_moe_layer", fmt::format("has {} entries, and num_hidden_layers is {}",
                                         flags.size(), m.layers.size()));
      return;
    }
    for (std::size_t i = 0; i < flags.size(); ++i) {
      if (flags[i]) m.layers[i].mlp = Mlp::moe;
    }
  } else {
    read_first_dense_moe_layers(c, m, 0);
  }
  const std::vector<std::string> mtp_types = c.strings("mtp_layer_types");
  if (!mtp_types.empty()) m.mtp_num_layers = static_cast<std::int64_t>(mtp_types.size());
  if (m.mtp_num_layers > 0) m.mtp_layer_kinds = {LayerSpec{Mixer::attention, Mlp::dense, 0, 0}};
  note_expert_bias(m, notes);
}

}  // namespace paramlayout::hf
