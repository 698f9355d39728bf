// Two grouped-query-attention MoE families with q/k norms and sigmoid routing with the router's
// expert bias, as their Megatron-Bridge bridges build them: Ling 2.0 (BailingMoeV2: one shared
// expert of moe_intermediate_size whatever num_shared_experts says) and Hunyuan 3 (HYV3:
// num_shared_experts x moe_intermediate_size). Dense first `first_k_dense_replace` layers (or where
// `mlp_layer_types` says "dense"), no linear biases, multi-token prediction layers each a copy of
// the last decoder layer.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

void read_gqa_moe(Config& c, ModelSpec& m) {
  read_llama_like(c, m);
  m.qk_layernorm = true;
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
}

}  // namespace

void map_bailing_moe_v2(Config& c, ModelSpec& m, Notes& notes) {
  read_gqa_moe(c, m);
  m.add_qkv_bias = c.boolean("use_qkv_bias", false);
  if (c.boolean("use_bias", false)) {
    c.fail("use_bias", "biases the linears, and Megatron-Bridge builds Ling without them");
    return;
  }
  if (!c.boolean("use_qk_norm", true)) {
    c.fail("use_qk_norm", "is false, and Megatron-Bridge's Ling bridge sets q/k norms");
    return;
  }
  const std::int64_t shared = c.integer("num_shared_experts", 1, 0);
  m.moe.shared_expert_size = m.moe.ffn_hidden_size;
  if (shared != 1) {
    notes.push_back(
        fmt::format("num_shared_experts {}: Megatron-Bridge builds one shared expert of "
                    "moe_intermediate_size {} regardless",
                    shared, m.moe.ffn_hidden_size));
  }
  read_first_dense_moe_layers(c, m, /*first_dense_default=*/1);
  note_expert_bias(m, notes);
}

void map_hy_v3(Config& c, ModelSpec& m, Notes& notes) {
  read_gqa_moe(c, m);
  if (c.boolean("attention_bias", false) || c.boolean("mlp_bias", false)) {
    c.fail("attention_bias", "and mlp_bias: Megatron-Bridge builds Hunyuan 3 without biases");
    return;
  }
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("num_shared_experts", 1, 0);
  read_dense_or_moe_layers(c, m, /*first_dense_default=*/1);
  note_expert_bias(m, notes);
}

}  // namespace paramlayout::hf
