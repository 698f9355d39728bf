// Nemotron-H: a hybrid of Mamba-2 mixers, attention, MLPs and MoEs, one per layer, as
// Megatron-Bridge's nemotron_h bridge builds it with Megatron-LM's HybridModel: no position
// embedding, RMSNorm, squared-ReLU MLPs without a gate.
#include <fmt/format.h>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

/// `hybrid_override_pattern` (or the MTP pattern): M Mamba-2, * attention, - MLP, E MoE.
std::vector<LayerSpec> read_pattern(Config& c, std::string_view key) {
  const std::string pattern = c.string(key, "");
  std::vector<LayerSpec> layers;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    switch (pattern[i]) {
      case 'M':
        layers.push_back(LayerSpec{Mixer::mamba, Mlp::none, 0, 0});
        break;
      case '*':
        layers.push_back(LayerSpec{Mixer::attention, Mlp::none, 0, 0});
        break;
      case '-':
        layers.push_back(LayerSpec{Mixer::none, Mlp::dense, 0, 0});
        break;
      case 'E':
        layers.push_back(LayerSpec{Mixer::none, Mlp::moe, 0, 0});
        break;
      default:
        c.fail(key, fmt::format("unknown layer type '{}' at {} (expected M Mamba, * attention, "
                                "- MLP or E MoE)",
                                pattern[i], i));
        return {};
    }
  }
  return layers;
}

bool any_moe(const std::vector<LayerSpec>& layers) {
  for (const LayerSpec& l : layers) {
    if (l.mlp == Mlp::moe) return true;
  }
  return false;
}

}  // namespace

void map_nemotron_h(Config& c, ModelSpec& m, Notes& notes) {
  m.hybrid = true;
  m.hidden_size = c.integer("hidden_size");
  m.vocab_size = c.integer("vocab_size");
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", false);
  m.normalization = Normalization::rms_norm;
  m.position_embedding = PositionEmbedding::none;
  m.gated_linear_unit = false;
  m.num_attention_heads = c.integer("num_attention_heads");
  m.num_query_groups = c.integer("num_key_value_heads", m.num_attention_heads, 1);
  const std::int64_t head_dim = c.integer("head_dim", 0, 1);
  const std::int64_t attention_head_dim = c.integer("attention_head_dim", 0, 1);
  m.kv_channels = head_dim > 0 ? head_dim : attention_head_dim;
  m.ffn_hidden_size = c.integer("intermediate_size");
  read_biases(c, m, notes);
  if (c.boolean("use_bias", false)) {
    c.fail("use_bias",
           "biases Mamba's in_proj and out_proj, which Megatron-LM's Mamba mixer "
           "never has");
    return;
  }
  if (!c.boolean("use_conv_bias", true)) {
    c.fail("use_conv_bias", "is false, and Megatron-LM's Mamba mixer always has conv1d_bias");
    return;
  }
  if (const std::int64_t kernel = c.integer("conv_kernel", 4, 1); kernel != 4) {
    c.fail("conv_kernel",
           fmt::format("is {}, and Megatron-LM's Mamba mixer convolves over 4", kernel));
    return;
  }
  MambaSpec& mamba = m.mamba;
  mamba.num_heads = c.integer("mamba_num_heads", 128, 1);
  mamba.head_dim = c.integer("mamba_head_dim", 64, 1);
  mamba.num_groups = c.integer("n_groups", 8, 1);
  mamba.state_dim = c.integer("ssm_state_size", 128, 1);

  if (!c.has("hybrid_override_pattern")) {
    c.fail("hybrid_override_pattern", "is required: it gives each layer's kind");
    return;
  }
  m.layers = read_pattern(c, "hybrid_override_pattern");
  const std::int64_t declared = c.integer("num_hidden_layers");
  if (!c.failed() && declared != m.num_layers()) {
    c.fail("num_hidden_layers", fmt::format("is {}, and hybrid_override_pattern has {} layers",
                                            declared, m.num_layers()));
    return;
  }
  const std::int64_t mtp = c.integer("num_nextn_predict_layers", 0, 0);
  if (mtp > 0) {
    m.hybrid_mtp_layers = read_pattern(c, "mtp_hybrid_override_pattern");
    if (m.hybrid_mtp_layers.empty() && !c.failed()) {
      c.fail("mtp_hybrid_override_pattern", "is required with num_nextn_predict_layers");
      return;
    }
    // Megatron-Bridge repeats one layer unless the config says otherwise: mtp.layers.0 only.
    m.mtp_num_layers = c.boolean("mtp_use_repeated_layer", true) ? 1 : mtp;
  }
  if (any_moe(m.layers) || any_moe(m.hybrid_mtp_layers)) {
    m.moe.grouped_gemm = true;
    m.moe.num_experts = c.integer("n_routed_experts");
    m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
    m.moe.shared_expert_size = c.integer("moe_shared_expert_intermediate_size", 0, 0);
    m.moe.latent_size = c.integer("moe_latent_size", 0, 1);
    if (c.integer("n_shared_experts", 1, 0) > 1) {
      c.fail("n_shared_experts",
             "above 1 is not understood (Megatron-Bridge reads "
             "moe_shared_expert_intermediate_size alone)");
      return;
    }
    note_expert_bias(m, notes);
  }
}

}  // namespace paramlayout::hf
