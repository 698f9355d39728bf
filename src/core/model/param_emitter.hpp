// Appends the params Megatron-LM's modules register (Transformer Engine layer spec), module
// by module, in registration order: a module's own params before its children's.
#pragma once

#include <string>

#include "paramlayout/model_chunk.hpp"

namespace paramlayout::model {

class ParamEmitter {
 public:
  ParamEmitter(const ModelSpec& model, const TensorSplit& split, ModelChunk& out)
      : m_(model), s_(split), out_(out) {}

  /// embedding.word_embeddings (and learned position embeddings).
  void embedding(bool shared);
  /// One decoder layer under `prefix` ("decoder.layers.3.").
  void layer(const std::string& prefix, const LayerSpec& layer);
  /// decoder.final_layernorm, or a hybrid model's decoder.final_norm.
  void final_norm();
  /// mtp.layers.<index>: its norms and projection, the layer(s) it holds, its final norm; in a
  /// pipeline chunk after `stage_offset` decoder layers.
  void mtp_layer(std::int64_t index, std::int64_t stage_offset);
  void output_layer(bool shared);
  /// The first stage's per-layer input embedding, projection and norm.
  void per_layer_inputs();

 private:
  ChunkParam& add(std::string name, std::vector<std::int64_t> shape);
  void norm(const std::string& prefix, std::int64_t n);
  void fused_norm(const std::string& prefix, std::int64_t n);
  void linear(const std::string& prefix, std::int64_t out, std::int64_t in, bool bias);
  void attention(const std::string& p, const LayerSpec& layer, bool fused_norm = true);
  void mla(const std::string& a);
  void sparse_mla(const std::string& a, const LayerSpec& layer);
  void mamba(const std::string& p, bool fused_norm = true);
  void gated_delta_net(const std::string& a);
  void dense_mlp(const std::string& m, std::int64_t ffn);
  void moe(const std::string& p);
  void own_norm(const std::string& prefix, std::int64_t n);
  void experts(const std::string& e);
  void grouped_experts(const std::string& e, std::int64_t fc1, std::int64_t fc2_in);
  void linear_replacement(const std::string& prefix);

  const ModelSpec& m_;
  const TensorSplit& s_;
  ModelChunk& out_;
};

}  // namespace paramlayout::model
