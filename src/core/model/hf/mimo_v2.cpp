// MiMo-V2-Flash, as Megatron-Bridge's mimo_v2_flash bridge builds it with its own attention
// (modeling_mimo_v2_flash.py): sliding-window layers (`hybrid_layer_pattern` 1, or
// "sliding_attention") with `swa_num_key_value_heads` and learned attention sinks, full
// layers with `num_key_value_heads` and none; values of `v_head_dim` beside query/key heads of
// `head_dim`; MoE where `moe_layer_freq` says 1, with the router's expert bias; dense
// multi-token prediction layers of sliding-window attention.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

/// Which layers slide: `hybrid_layer_pattern` (1 slides) or `layer_types`.
std::vector<bool> read_sliding_layers(Config& c, std::size_t layers) {
  std::vector<bool> sliding;
  if (c.has("hybrid_layer_pattern")) {
    for (std::int64_t v : c.integers("hybrid_layer_pattern")) sliding.push_back(v != 0);
  } else {
    for (const std::string& type : c.strings("layer_types")) {
      sliding.push_back(type == "sliding_attention");
    }
  }
  if (!sliding.empty() && sliding.size() != layers) {
    c.fail(c.has("hybrid_layer_pattern") ? "hybrid_layer_pattern" : "layer_types",
           fmt::format("has {} entries, and num_hidden_layers is {}", sliding.size(), layers));
  }
  return sliding;
}

}  // namespace

void map_mimo_v2_flash(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.add_qkv_bias = c.boolean("attention_bias", false);
  m.v_head_dim = c.integer("v_head_dim", 0, 1);
  const std::int64_t full_groups = m.query_groups(LayerSpec{});
  const std::int64_t swa_groups = c.integer("swa_num_key_value_heads", full_groups, 1);
  for (std::string_view key : {"swa_head_dim", "swa_v_head_dim"}) {
    const std::int64_t own =
        key == "swa_head_dim" ? m.head_dim() : (m.v_head_dim > 0 ? m.v_head_dim : m.head_dim());
    if (c.integer(key, own, 1) != own) {
      c.fail(key,
             "differs from the full layers', and Megatron-Bridge's MiMo-V2-Flash "
             "attention gives every layer the same head sizes");
      return;
    }
  }
  const std::vector<bool> sliding = read_sliding_layers(c, m.layers.size());
  if (c.failed()) return;
  for (std::size_t i = 0; i < sliding.size(); ++i) {
    m.layers[i].num_query_groups = sliding[i] ? swa_groups : full_groups;
    m.layers[i].softmax_offset = sliding[i];
  }
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("n_routed_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  if (c.has("mlp_layer_types")) {
    read_dense_or_moe_layers(c, m, 0);
  } else {
    const std::vector<std::int64_t> freq = c.integers("moe_layer_freq");
    if (freq.size() != m.layers.size()) {
      c.fail("moe_layer_freq", fmt::format("has {} entries, and num_hidden_layers is {}",
                                           freq.size(), m.layers.size()));
      return;
    }
    for (std::size_t i = 0; i < freq.size(); ++i) {
      if (freq[i] != 0) m.layers[i].mlp = Mlp::moe;
    }
  }
  if (m.mtp_num_layers > 0) {
    LayerSpec mtp{Mixer::attention, Mlp::dense, 0, swa_groups};
    mtp.softmax_offset = true;
    m.mtp_layer_kinds = {mtp};
    notes.push_back(fmt::format(
        "num_nextn_predict_layers {}: Megatron-Bridge counts the checkpoint's model.mtp.layers "
        "instead of reading the config",
        m.mtp_num_layers));
  }
  note_expert_bias(m, notes);
}

}  // namespace paramlayout::hf
