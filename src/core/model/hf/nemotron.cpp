// Nemotron (Nemotron-4, Minitron), as Megatron-Bridge's nemotron bridge builds it: LayerNorm with
// biases (zero-centred gamma, no param of its own), a squared-ReLU MLP without a gate, no linear
// biases, rotary positions on part of each head (no param).
#include "mappers.hpp"

namespace paramlayout::hf {

void map_nemotron(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.normalization = Normalization::layer_norm;
  m.gated_linear_unit = false;
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.add_qkv_bias = c.boolean("attention_bias", false);
  if (c.boolean("mlp_bias", false)) {
    c.fail("mlp_bias",
           "biases up_proj and down_proj, and Megatron-Bridge builds Nemotron without linear "
           "biases (add_bias_linear false)");
  }
}

}  // namespace paramlayout::hf
