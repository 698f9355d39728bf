// ERNIE 4.5 MoE, as Megatron-Bridge's ernie_45 bridge builds it: dense layers before
// `moe_layer_start_index` (or where `mlp_layer_types` says "dense"), then mixtures of
// `moe_num_experts` experts of `moe_intermediate_size` with a shared MLP of moe_num_shared_experts
// x that size and sigmoid routing with the router's expert bias; no biases; no multi-token
// prediction layers (Megatron-Bridge builds none).
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

/// An integer, or the first of a list of them (ERNIE's multimodal configs give one per modality).
std::int64_t first_integer(Config& c, std::string_view key, std::int64_t fallback) {
  std::optional<json::Element> e = c.find(key);
  if (!e) return fallback;
  if (e->is_array()) {
    const std::vector<std::int64_t> values = c.integers(key);
    return values.empty() ? fallback : values.front();
  }
  return c.integer(key, fallback, 0);
}

}  // namespace

void map_ernie4_5_moe(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m, /*tie_default=*/true);
  m.mtp_num_layers = 0;
  m.ffn_hidden_size = c.integer("intermediate_size");
  if (c.boolean("use_bias", false)) {
    c.fail("use_bias", "biases the linears, and Megatron-Bridge builds ERNIE 4.5 without biases");
    return;
  }
  m.moe.num_experts = first_integer(c, "moe_num_experts", 64);
  m.moe.ffn_hidden_size = first_integer(c, "moe_intermediate_size", m.ffn_hidden_size);
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("moe_num_shared_experts", 2, 0);
  const std::vector<std::string> types = c.strings("mlp_layer_types");
  if (!types.empty()) {
    if (types.size() != m.layers.size()) {
      c.fail("mlp_layer_types", fmt::format("has {} entries, and num_hidden_layers is {}",
                                            types.size(), m.layers.size()));
      return;
    }
    for (std::size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "dense") m.layers[i].mlp = Mlp::moe;
    }
  } else {
    const std::int64_t start = first_integer(c, "moe_layer_start_index", 1);
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
      if (static_cast<std::int64_t>(i) >= start) m.layers[i].mlp = Mlp::moe;
    }
    const std::int64_t end = first_integer(c, "moe_layer_end_index", m.num_layers() - 1);
    const std::int64_t interval = c.integer("moe_layer_interval", 1, 1);
    if (end < m.num_layers() - 1 || interval != 1) {
      notes.push_back(fmt::format(
          "moe_layer_end_index {} and moe_layer_interval {}: Megatron-Bridge makes every layer "
          "from moe_layer_start_index {} on a mixture of experts regardless",
          end, interval, start));
    }
  }
  note_expert_bias(m, notes);
}

}  // namespace paramlayout::hf
