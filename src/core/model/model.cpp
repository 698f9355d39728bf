#include "paramlayout/model.hpp"

#include <fmt/format.h>

namespace paramlayout {

std::int64_t ModelSpec::query_groups(const LayerSpec& layer) const {
  if (layer.num_query_groups > 0) return layer.num_query_groups;
  return num_query_groups > 0 ? num_query_groups : num_attention_heads;
}

std::int64_t ModelSpec::head_dim() const {
  return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
}

std::int64_t ModelSpec::dense_ffn(const LayerSpec& layer) const {
  return layer.ffn_hidden_size > 0 ? layer.ffn_hidden_size : ffn_hidden_size;
}

std::int64_t ModelSpec::attention_heads(const LayerSpec& layer) const {
  return layer.num_attention_heads > 0 ? layer.num_attention_heads : num_attention_heads;
}

std::int64_t ModelSpec::head_dim(const LayerSpec& layer) const {
  return layer.kv_channels > 0 ? layer.kv_channels : head_dim();
}

LayerSpec ModelSpec::mtp_layer(std::int64_t index, std::int64_t stage_offset) const {
  if (mtp_kinds_after_stage_offset) {
    const std::int64_t at = index + stage_offset;
    return at < static_cast<std::int64_t>(mtp_layer_kinds.size())
               ? mtp_layer_kinds[static_cast<std::size_t>(at)]
               : LayerSpec{Mixer::attention, Mlp::dense, 0, 0};
  }
  if (!mtp_layer_kinds.empty()) {
    const auto last = static_cast<std::int64_t>(mtp_layer_kinds.size()) - 1;
    return mtp_layer_kinds[static_cast<std::size_t>(index < last ? index : last)];
  }
  return layers.empty() ? LayerSpec{} : layers.back();
}

std::int64_t MambaSpec::inner(std::int64_t hidden) const {
  return num_heads > 0 ? num_heads * head_dim : 2 * hidden;
}

std::int64_t MambaSpec::heads(std::int64_t hidden) const {
  return num_heads > 0 ? num_heads : inner(hidden) / head_dim;
}

std::vector<LayerSpec> ModelSpec::mtp_layer_specs() const {
  if (mtp_num_layers == 0) return {};
  if (hybrid) return hybrid_mtp_layers;
  std::vector<LayerSpec> out;
  for (std::int64_t i = 0; i < mtp_num_layers; ++i) out.push_back(mtp_layer(i));
  // On a later pipeline stage the model's own layer may hold them too.
  if (mtp_kinds_after_stage_offset) out.push_back(mtp_layer(mtp_num_layers + num_layers()));
  return out;
}

bool ModelSpec::uses(Mixer mixer) const {
  for (const LayerSpec& l : layers) {
    if (l.mixer == mixer) return true;
  }
  for (const LayerSpec& l : mtp_layer_specs()) {
    if (l.mixer == mixer) return true;
  }
  return false;
}

bool ModelSpec::uses_attention() const {
  return uses(Mixer::attention) || uses(Mixer::mamba_and_attention);
}

bool ModelSpec::uses_mamba() const {
  return uses(Mixer::mamba) || uses(Mixer::mamba_and_attention);
}

bool ModelSpec::uses(Mlp mlp) const {
  for (const LayerSpec& l : layers) {
    if (l.mlp == mlp) return true;
  }
  for (const LayerSpec& l : mtp_layer_specs()) {
    if (l.mlp == mlp) return true;
  }
  return false;
}

namespace {

/// Largest size a model field may have; products of a few stay far inside 64 bits.
constexpr std::int64_t kMaxSize = (std::int64_t{1} << 31) - 1;

}  // namespace

std::optional<std::string> model_problem(const ModelSpec& m) {
  const auto size = [](std::string_view name, std::int64_t v,
                       std::int64_t min = 1) -> std::optional<std::string> {
    if (v < min || v > kMaxSize) {
      return fmt::format("{} must be in [{}, {}], got {}", name, min, kMaxSize, v);
    }
    return std::nullopt;
  };
  std::optional<std::string> p;
  if ((p = size("num_layers", m.num_layers()))) return p;
  if ((p = size("hidden_size", m.hidden_size))) return p;
  if ((p = size("vocab_size", m.vocab_size))) return p;
  if ((p = size("make_vocab_size_divisible_by", m.make_vocab_size_divisible_by))) return p;
  if ((p = size("mtp_num_layers", m.mtp_num_layers, 0))) return p;
  if (m.position_embedding == PositionEmbedding::learned_absolute &&
      (p = size("max_position_embeddings", m.max_position_embeddings))) {
    return p;
  }
  if (m.uses_attention()) {
    if ((p = size("num_attention_heads", m.num_attention_heads))) return p;
    if ((p = size("num_query_groups", m.num_query_groups, 0))) return p;
    if ((p = size("kv_channels", m.kv_channels, 0))) return p;
    // Multi-latent attention sizes its heads by its own fields, never by kv_channels.
    if (!m.mla && m.kv_channels == 0 && m.hidden_size % m.num_attention_heads != 0) {
      return fmt::format(
          "hidden_size {} is not divisible by num_attention_heads {} (set "
          "kv_channels)",
          m.hidden_size, m.num_attention_heads);
    }
    for (const LayerSpec& l : m.layers) {
      const std::int64_t groups = m.query_groups(l);
      const std::int64_t heads = m.attention_heads(l);
      if ((p = size("num_attention_heads", heads)) || (p = size("kv_channels", l.kv_channels, 0))) {
        return p;
      }
      if (!m.mla && l.attends() && (groups < 1 || heads % groups != 0)) {
        return fmt::format("num_attention_heads {} is not divisible by num_query_groups {}", heads,
                           groups);
      }
    }
  }
  if (m.mla) {
    if ((p = size("q_lora_rank", m.mla->q_lora_rank, 0))) return p;
    if ((p = size("kv_lora_rank", m.mla->kv_lora_rank))) return p;
    if ((p = size("qk_head_dim", m.mla->qk_head_dim))) return p;
    if ((p = size("qk_pos_emb_head_dim", m.mla->qk_pos_emb_head_dim, 0))) return p;
    if ((p = size("v_head_dim", m.mla->v_head_dim))) return p;
  }
  if (m.dsa) {
    if (!m.mla || m.mla->q_lora_rank == 0) {
      return std::string(
          "sparse attention (DSA) needs multi-latent attention with query "
          "compression (q_lora_rank)");
    }
    if ((p = size("dsa_indexer_n_heads", m.dsa->index_heads))) return p;
    if ((p = size("dsa_indexer_head_dim", m.dsa->index_head_dim))) return p;
  }
  for (const LayerSpec& l : m.layers) {
    if (l.mlp == Mlp::dense && (p = size("ffn_hidden_size", m.dense_ffn(l)))) return p;
  }
  if (m.uses(Mlp::moe)) {
    if ((p = size("num_experts", m.moe.num_experts))) return p;
    if ((p = size("moe_ffn_hidden_size", m.moe.ffn_hidden_size))) return p;
    if ((p = size("moe_shared_expert_intermediate_size", m.moe.shared_expert_size, 0))) {
      return p;
    }
    if ((p = size("moe_latent_size", m.moe.latent_size, 0))) return p;
  }
  if (m.per_layer_input.size > 0) {
    if ((p = size("hidden_size_per_layer_input", m.per_layer_input.size))) return p;
    if ((p = size("vocab_size_per_layer_input", m.per_layer_input.vocab_size))) return p;
  }
  if (m.uses_mamba()) {
    if ((p = size("mamba_state_dim", m.mamba.state_dim))) return p;
    if ((p = size("mamba_head_dim", m.mamba.head_dim))) return p;
    if ((p = size("mamba_num_groups", m.mamba.num_groups))) return p;
    if ((p = size("mamba_num_heads", m.mamba.num_heads, 0))) return p;
    if (m.mamba.inner(m.hidden_size) % m.mamba.head_dim != 0) {
      return fmt::format("the Mamba inner size {} is not divisible by mamba_head_dim {}",
                         m.mamba.inner(m.hidden_size), m.mamba.head_dim);
    }
    if (m.mamba.heads(m.hidden_size) % m.mamba.num_groups != 0) {
      return fmt::format("the {} Mamba heads are not divisible by mamba_num_groups {}",
                         m.mamba.heads(m.hidden_size), m.mamba.num_groups);
    }
  }
  if (m.uses(Mixer::gated_delta_net)) {
    const GatedDeltaNetSpec& g = m.gated_delta_net;
    if ((p = size("linear_key_head_dim", g.key_head_dim))) return p;
    if ((p = size("linear_num_key_heads", g.num_key_heads))) return p;
    if ((p = size("linear_value_head_dim", g.value_head_dim))) return p;
    if ((p = size("linear_num_value_heads", g.num_value_heads))) return p;
    if ((p = size("linear_conv_kernel_dim", g.conv_kernel))) return p;
  }
  if (m.moe.shared_expert_size > 0 && m.add_bias_linear) {
    return std::string("shared experts need add_bias_linear off (--disable-bias-linear)");
  }
  return std::nullopt;
}

}  // namespace paramlayout
