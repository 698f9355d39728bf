// Gemma, Gemma 2 and Gemma 3 (text), as Megatron-Bridge's gemma bridges and providers build
// them: tied embeddings and head_dim 256 by default (the config classes' defaults), GeGLU,
// RMSNorm with zero-centred gamma (no param of its own). Gemma 2 and 3 normalize the outputs
// of the attention and of the MLP too: Megatron-Bridge's TERowParallelLinearLayerNorm gives
// linear_proj and linear_fc2 a `post_layernorm`. Sliding windows, soft-capping, the query
// scale and embedding scaling change no param.
#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

void read_gemma(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m, /*tie_default=*/true);
  if (m.kv_channels == 0) m.kv_channels = 256;
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
}

}  // namespace

void map_gemma(Config& c, ModelSpec& m, Notes& notes) { read_gemma(c, m, notes); }

void map_gemma2(Config& c, ModelSpec& m, Notes& notes) {
  read_gemma(c, m, notes);
  m.post_linear_norms = true;
}

/// Gemma 3 adds q/k norms over one head.
void map_gemma3(Config& c, ModelSpec& m, Notes& notes) {
  read_gemma(c, m, notes);
  m.post_linear_norms = true;
  m.qk_layernorm = true;
}

}  // namespace paramlayout::hf
