// What decides the tensors Megatron-LM's modules allocate beside the params and keep between
// steps: the rotary embeddings' kind and size, the MoE routers' load balancing.
#pragma once

#include <cstdint>

namespace paramlayout {

/// The rotary embedding class a module builds.
enum class RotaryKind : std::uint8_t {
  none,
  rope,   ///< RotaryEmbedding
  yarn,   ///< YarnRotaryEmbedding
  mrope,  ///< MultimodalRotaryEmbedding
};

/// The launch's choices behind the model's buffers (its shapes are the ModelSpec's).
struct ModelBufferOptions {
  /// The model's own rotary embedding, one per chunk (--position-embedding-type; GPTModel
  /// builds none for rope or mrope under multi-latent attention).
  RotaryKind rotary = RotaryKind::none;
  /// Each multi-latent attention layer's (--rope-type; MLATransformerConfig's default yarn).
  RotaryKind mla_rotary = RotaryKind::yarn;
  /// apply_rope_fusion as validate_args leaves it (--no-rope-fusion; off unless rope).
  bool rope_fusion = false;
  /// The model's yarn's original_max_position_embeddings
  /// (--yarn-original-max-position-embeddings).
  std::int64_t yarn_original_max_positions = 4096;
  bool router_global_aux_loss = false;     ///< global_aux_loss with a coefficient > 0
  bool router_quantile_balancing = false;  ///< --moe-router-load-balancing-type quantile_balancing

  bool operator==(const ModelBufferOptions&) const = default;
};

}  // namespace paramlayout
