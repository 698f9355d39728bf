// GPT-2 and GPT-3-style models: Megatron-LM's own GPT (no bridge needed): learned absolute
// positions, LayerNorm, biases everywhere, a 4 x hidden GELU MLP and tied embeddings (the
// GPT-2 config class's default).
#include "mappers.hpp"

namespace paramlayout::hf {

void map_gpt2(Config& c, ModelSpec& m, Notes&) {
  m.hidden_size = c.integer("n_embd");
  m.layers.assign(static_cast<std::size_t>(c.integer("n_layer")), LayerSpec{});
  m.num_attention_heads = c.integer("n_head");
  m.ffn_hidden_size = c.integer("n_inner", 4 * m.hidden_size, 1);
  m.vocab_size = c.integer("vocab_size");
  m.position_embedding = PositionEmbedding::learned_absolute;
  m.max_position_embeddings = c.integer("n_positions");
  m.normalization = Normalization::layer_norm;
  m.add_bias_linear = true;
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", true);
}

}  // namespace paramlayout::hf
