// MiniMax-M2, as Megatron-Bridge's minimax_m2 bridge builds it: every layer a mixture of
// `num_local_experts` experts of `intermediate_size`, sigmoid routing with the router's expert
// bias, and q/k norms over the whole query and key projections that Megatron-Bridge's FullDimQNorm
// / FullDimKNorm split tp ways with the heads.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {

void map_minimax_m2(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_local_experts");
  m.moe.ffn_hidden_size = m.ffn_hidden_size;
  for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
  m.qk_layernorm = true;
  m.qk_layernorm_split = true;
  if (!c.boolean("use_qk_norm", true) || c.string("qk_norm_type", "per_layer") != "per_layer") {
    c.fail("use_qk_norm",
           "and qk_norm_type \"per_layer\" are what Megatron-Bridge builds (full-dimension q/k "
           "norms)");
    return;
  }
  if (c.integer("shared_intermediate_size", 0, 0) > 0) {
    c.fail("shared_intermediate_size",
           "adds a shared expert, which Megatron-Bridge's MiniMax-M2 mapping does not build");
    return;
  }
  if (c.boolean("use_mtp", false)) {
    notes.push_back(
        fmt::format("use_mtp: Megatron-Bridge builds none of the {} multi-token prediction modules",
                    c.integer("num_mtp_modules", 0, 0)));
  }
  note_expert_bias(m, notes);
}

}  // namespace paramlayout::hf
