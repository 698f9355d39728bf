// Falcon-H1, as Megatron-Bridge's falcon_h1 bridge builds it with its own FalconH1Model: every
// layer a parallel one (FalconH1Layer), a norm, then a Mamba-2 mixer and self-attention side by
// side on the normalized input, then a gated MLP with its norm fused; RMSNorm, rotary positions,
// `projectors_bias` on every linear. The mixer's sizes are `mamba_n_heads` x `mamba_d_head`,
// `mamba_n_groups` x `mamba_d_state`, a `mamba_d_conv` kernel; its in_proj and out_proj have no
// biases whatever `mamba_proj_bias` says (Bridge passes none). The muP multipliers change no
// param. Megatron-LM splits the mixer's groups tp ways: Falcon-H1's one group allows tp 1 only.
#include <fmt/format.h>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {

void map_falcon_h1(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  m.mtp_num_layers = 0;
  m.ffn_hidden_size = c.integer("intermediate_size", 14336, 1);
  // Bridge maps attention_bias to add_qkv_bias, then sets add_bias_linear from projectors_bias.
  m.add_qkv_bias = c.boolean("attention_bias", false);
  m.add_bias_linear = c.boolean("projectors_bias", false);
  c.boolean("mlp_bias", false);  // mapped first, then replaced by projectors_bias
  for (LayerSpec& l : m.layers) l.mixer = Mixer::mamba_and_attention;

  // FalconH1Config's defaults where the config has no value.
  MambaSpec& mamba = m.mamba;
  mamba.num_heads = c.integer("mamba_n_heads", 128, 1);
  mamba.head_dim = c.integer("mamba_d_head", 8, 1);
  mamba.num_groups = c.integer("mamba_n_groups", 1, 1);
  mamba.state_dim = c.integer("mamba_d_state", 256, 1);
  mamba.conv_kernel = c.integer("mamba_d_conv", 4, 1);
  mamba.gated_norm = c.boolean("mamba_rms_norm", false);
  // Megatron-LM's MambaMixer at d98e8a64 asserts both.
  if (c.boolean("mamba_norm_before_gate", true)) {
    c.fail("mamba_norm_before_gate",
           "is true (FalconH1Config's default), and Megatron-LM's MambaMixer at d98e8a64 builds "
           "only the norm after the gate (it asserts norm_before_gate is false)");
    return;
  }
  if (!c.boolean("mamba_conv_bias", true)) {
    c.fail("mamba_conv_bias", "is false, and Megatron-LM's MambaMixer always has conv1d_bias");
    return;
  }
  const std::int64_t inner = mamba.num_heads * mamba.head_dim;
  if (const std::int64_t d_ssm = c.integer("mamba_d_ssm", inner, 1); d_ssm != inner) {
    notes.push_back(
        fmt::format("mamba_d_ssm {}: Megatron-Bridge does not read it; the mixer's inner size is "
                    "mamba_n_heads x mamba_d_head = {}",
                    d_ssm, inner));
  }
  if (c.boolean("mamba_proj_bias", false)) {
    notes.push_back(fmt::format(
        "mamba_proj_bias: Megatron-Bridge builds Mamba's in_proj and out_proj without biases: {} "
        "checkpoint elements have no param",
        group_digits(m.num_layers() * (2 * inner + 2 * mamba.num_groups * mamba.state_dim +
                                       mamba.num_heads + m.hidden_size))));
  }
  if (!c.boolean("mamba_use_mlp", true)) {
    notes.emplace_back(
        "mamba_use_mlp false: Megatron-Bridge gives every layer its MLP all the same");
  }
  c.integers("attn_layer_indices");  // Bridge builds attention in every layer all the same
}

}  // namespace paramlayout::hf
