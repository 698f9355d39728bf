// Qwen2 / Qwen2.5 (and MiMo), Qwen2-MoE (Qwen1.5-MoE), Qwen3, Qwen3-MoE, Qwen3-Next and Qwen3.5, as
// Megatron-Bridge's qwen bridges map them.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

/// Routed experts of `moe_intermediate_size` on the layers `decoder_sparse_step` and
/// `mlp_only_layers` leave to them; dense layers keep `intermediate_size` (which a model of experts
/// only, Qwen3.5-MoE, need not give).
void read_qwen_moe(Config& c, ModelSpec& m) {
  m.ffn_hidden_size = c.integer("intermediate_size", 0, 1);
  // transformers 5 saves the count as num_local_experts as well (or instead).
  m.moe.num_experts = integer_of(c, {"num_experts", "num_local_experts"});
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  read_sparse_step_moe_layers(c, m);
}

/// One shared expert of `shared_expert_intermediate_size` whose output a sigmoid gate scales
/// (shared_expert_gate -> Megatron-LM's shared_experts.gate_weight).
void read_gated_shared_expert(Config& c, ModelSpec& m) {
  m.moe.shared_expert_size = c.integer("shared_expert_intermediate_size", 0, 0);
  m.moe.shared_expert_gate = m.moe.shared_expert_size > 0;
}

}  // namespace

/// Qwen2 biases q, k and v always (the modelling code, not the config, says so).
void map_qwen2(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.add_qkv_bias = true;
}

/// MiMo: Qwen2 with `num_nextn_predict_layers` multi-token prediction layers, each a copy of a
/// decoder layer; Megatron-Bridge's mimo bridge biases q, k and v whatever `attention_bias` says.
void map_mimo(Config& c, ModelSpec& m, Notes& notes) {
  map_qwen2(c, m, notes);
  if (!c.boolean("attention_bias", true)) {
    const std::int64_t qkv = (m.num_attention_heads + 2 * m.query_groups(LayerSpec{})) *
                             m.head_dim() * (m.num_layers() + m.mtp_num_layers);
    notes.push_back(
        fmt::format("attention_bias false: Megatron-Bridge biases linear_qkv "
                    "regardless, {} elements the checkpoint does not have",
                    qkv));
  }
}

void map_qwen2_moe(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  // transformers 5's Qwen2MoeConfig.qkv_bias (true by default); Megatron-Bridge's bridge
  // always builds the biases.
  if (!c.boolean("qkv_bias", true)) {
    c.fail("qkv_bias", "is false: Megatron-Bridge's Qwen2-MoE bridge builds q, k and v biases");
  }
  m.add_qkv_bias = true;
  read_qwen_moe(c, m);
  read_gated_shared_expert(c, m);
}

void map_qwen3(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
  m.qk_layernorm = true;
}

void map_qwen3_moe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  read_biases(c, m, notes);
  m.qk_layernorm = true;
  read_qwen_moe(c, m);
}

namespace {

/// Gated delta net (linear attention) layers, with full attention where `layer_types` says
/// "full_attention" (or every `full_attention_interval`-th layer); the full attention gates its
/// output per head (attention_output_gate) and has q/k norms (Qwen3-Next, Qwen3.5).
void read_gated_delta_net_layers(Config& c, ModelSpec& m, Notes& notes) {
  read_biases(c, m, notes);
  m.qk_layernorm = true;
  m.attention_output_gate = true;
  GatedDeltaNetSpec& g = m.gated_delta_net;
  g.conv_kernel = c.integer("linear_conv_kernel_dim", 4, 1);
  g.key_head_dim = c.integer("linear_key_head_dim", 128, 1);
  g.value_head_dim = c.integer("linear_value_head_dim", 128, 1);
  g.num_key_heads = c.integer("linear_num_key_heads", 16, 1);
  g.num_value_heads = c.integer("linear_num_value_heads", 32, 1);
  const std::int64_t interval = c.integer("full_attention_interval", 4, 1);
  const std::vector<std::string> types = c.strings("layer_types");
  if (!types.empty()) {
    if (types.size() != m.layers.size()) {
      c.fail("layer_types", fmt::format("has {} entries, and num_hidden_layers is {}", types.size(),
                                        m.layers.size()));
      return;
    }
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "linear_attention") {
        m.layers[i].mixer = Mixer::gated_delta_net;
      } else if (types[i] != "full_attention") {
        c.reader().fail(c.path("layer_types").item(i),
                        fmt::format("unknown layer type \"{}\" (expected \"linear_attention\" "
                                    "or \"full_attention\")",
                                    types[i]));
        return;
      }
    }
    return;
  }
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if ((static_cast<std::int64_t>(i) + 1) % interval != 0) {
      m.layers[i].mixer = Mixer::gated_delta_net;
    }
  }
}

}  // namespace

/// Qwen3-Next and Qwen3.5-MoE: mixtures of experts with a gated shared expert on every layer
/// `decoder_sparse_step` leaves to them.
void map_qwen3_next(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  // qwen3_next_bridge.py:70, qwen35_bridge.py:99: global_aux_loss, with router_aux_loss_coef
  // as its coefficient (model_bridge.py CONFIG_MAPPING).
  m.moe.router_global_aux_loss = c.number("router_aux_loss_coef", 0.0) > 0;
  read_qwen_moe(c, m);
  read_gated_shared_expert(c, m);
  read_gated_delta_net_layers(c, m, notes);
}

/// Qwen3.5 (dense): the same layers with a dense MLP of `intermediate_size`.
void map_qwen3_5(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_gated_delta_net_layers(c, m, notes);
}

}  // namespace paramlayout::hf
