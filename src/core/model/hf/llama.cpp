// Llama and the decoders built like it: Mistral (Mistral-Nemo, Ministral), Ministral 3's language
// model, Mixtral and Phi-3 / Phi-4 (Megatron-Bridge's llama, mistral, ministral3, mixtral and phi
// bridges).
#include "mappers.hpp"

namespace paramlayout::hf {

/// Llama 2, 3, 3.1, 3.2 and Mistral: `head_dim` sets kv_channels where it is not hidden /
/// heads (Mistral-Nemo: 32 heads x 128 over 5120).
void map_llama(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
}

/// Ministral 3 (Mistral3ForConditionalGeneration's language model): the fields Megatron-Bridge's
/// ministral3 bridge reads (sizes, key/value heads, head_dim, vocab, tied embeddings), each
/// layer a Llama's without biases; the Llama-4 query scaling changes no param.
void map_ministral3(Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
}

/// Every layer is a mixture of `num_local_experts` experts of `intermediate_size`.
void map_mixtral(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
  m.moe.num_experts = c.integer("num_local_experts");
  m.moe.ffn_hidden_size = m.ffn_hidden_size;
  for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
}

/// Phi-3 and Phi-4 store q/k/v and gate/up fused (qkv_proj, gate_up_proj), with the same
/// shapes as Megatron-LM's linear_qkv and linear_fc1. Long-context rope scaling and a
/// partial rotary factor change no param.
void map_phi3(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
}

}  // namespace paramlayout::hf
