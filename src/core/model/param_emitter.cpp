// Inside a GPT decoder layer (TransformerLayer): the input norm where it is not fused into
// linear_qkv (multi-latent attention), self_attention (core_attention's sinks, linear_proj
// and its output norm, then linear_qkv and the q/k norms, or MLA's projections), the pre-MLP
// norm (MoE layers only: dense MLPs fuse it into linear_fc1), then the MLP or the MoE
// (router, latent projections, experts, shared experts). A hybrid model's layer holds one of
// these parts, or a Mamba mixer; Falcon-H1's holds a norm, a Mamba mixer and self-attention side
// by side, then its MLP. Gemma 4's layers (Megatron-Bridge's) add norms of their own after the
// MLP, and per-layer inputs.
#include "param_emitter.hpp"

#include <fmt/format.h>

namespace paramlayout::model {

ChunkParam& ParamEmitter::add(std::string name, std::vector<std::int64_t> shape) {
  ChunkParam& p = out_.params.emplace_back();
  p.name = std::move(name);
  p.shape = std::move(shape);
  return p;
}

/// A norm module (TENorm): `weight`, and `bias` under LayerNorm.
void ParamEmitter::norm(const std::string& prefix, std::int64_t n) {
  add(prefix + "weight", {n});
  if (m_.normalization == Normalization::layer_norm) add(prefix + "bias", {n});
}

/// A norm fused into the linear that follows it (TE's LayerNormLinear).
void ParamEmitter::fused_norm(const std::string& prefix, std::int64_t n) {
  add(prefix + "layer_norm_weight", {n});
  if (m_.normalization == Normalization::layer_norm) add(prefix + "layer_norm_bias", {n});
}

void ParamEmitter::linear(const std::string& prefix, std::int64_t out, std::int64_t in, bool bias) {
  add(prefix + "weight", {out, in});
  if (bias) add(prefix + "bias", {out});
}

void ParamEmitter::embedding(bool shared) {
  const std::int64_t rows = padded_vocab_size(m_, s_.tp) / s_.tp;
  ChunkParam& e = add("embedding.word_embeddings.weight", {rows, m_.hidden_size});
  e.embedding_or_output = true;
  e.shared_embedding = shared;
  if (m_.position_embedding == PositionEmbedding::learned_absolute) {
    add("embedding.position_embeddings.weight", {m_.max_position_embeddings, m_.hidden_size});
  }
}

void ParamEmitter::output_layer(bool shared) {
  const std::int64_t rows = padded_vocab_size(m_, s_.tp) / s_.tp;
  ChunkParam& p = add("output_layer.weight", {rows, m_.hidden_size});
  p.embedding_or_output = true;
  p.shared_embedding = shared;
}

/// A norm of Megatron-Bridge's Gemma 4 modules (Gemma4RMSNorm): `weight` alone.
void ParamEmitter::own_norm(const std::string& prefix, std::int64_t n) {
  add(prefix + "weight", {n});
}

/// Registered after the output layer (_attach_ple_modules runs once GPTModel is built).
void ParamEmitter::per_layer_inputs() {
  const PerLayerInputSpec& per_layer = m_.per_layer_input;
  const std::int64_t channels = m_.num_layers() * per_layer.size;
  add("per_layer_embedding.weight", {per_layer.vocab_size / s_.tp, channels});
  add("per_layer_model_proj.weight", {channels / s_.tp, m_.hidden_size});
  own_norm("per_layer_proj_norm.", per_layer.size);
}

/// Mamba-style stacks (HybridModel's, Falcon-H1's) name it final_norm.
void ParamEmitter::final_norm() {
  const bool mamba_stack = m_.hybrid || m_.uses(Mixer::mamba_and_attention);
  norm(mamba_stack ? "decoder.final_norm." : "decoder.final_layernorm.", m_.hidden_size);
}

void ParamEmitter::mtp_layer(std::int64_t index, std::int64_t stage_offset) {
  const std::string p = fmt::format("mtp.layers.{}.", index);
  norm(p + "enorm.", m_.hidden_size);
  norm(p + "hnorm.", m_.hidden_size);
  linear(p + "eh_proj.", m_.hidden_size / s_.tp, 2 * m_.hidden_size, false);
  if (m_.hybrid) {
    for (std::size_t j = 0; j < m_.hybrid_mtp_layers.size(); ++j) {
      layer(fmt::format("{}mtp_model_layer.layers.{}.", p, j), m_.hybrid_mtp_layers[j]);
    }
  } else {
    layer(p + "mtp_model_layer.", m_.mtp_layer(index, stage_offset));
  }
  norm(p + "final_layernorm.", m_.hidden_size);
}

void ParamEmitter::layer(const std::string& prefix, const LayerSpec& layer) {
  switch (layer.mixer) {
    case Mixer::attention:
      attention(prefix, layer);
      break;
    case Mixer::mamba:
      mamba(prefix + "mixer.");
      break;
    case Mixer::gated_delta_net:
      gated_delta_net(prefix + "self_attention.");
      break;
    case Mixer::linear:
      linear_replacement(prefix + "self_attention.");
      break;
    case Mixer::mamba_and_attention:
      norm(prefix + "norm.", m_.hidden_size);
      mamba(prefix + "mamba_mixer.", false);
      attention(prefix, layer, false);
      break;
    case Mixer::none:
      break;
  }
  switch (layer.mlp) {
    case Mlp::dense:
      if (m_.local_spec) {
        norm(prefix + "pre_mlp_layernorm.", m_.hidden_size);
      } else if (m_.pre_linear_norms) {
        fused_norm(prefix + "mlp.linear_fc1.", m_.hidden_size);
      }
      dense_mlp(prefix + "mlp.", m_.dense_ffn(layer));
      if (m_.post_linear_norms) norm(prefix + "mlp.linear_fc2.post_layernorm.", m_.hidden_size);
      break;
    case Mlp::moe:
      moe(prefix);
      break;
    case Mlp::linear:
      linear_replacement(prefix + "mlp.");
      break;
    case Mlp::none:
      break;
  }
  if (m_.sublayer_output_norms) {
    own_norm(prefix + "post_self_attn_layernorm.", m_.hidden_size);
    own_norm(prefix + "post_mlp_layernorm.", m_.hidden_size);
  }
  if (layer.mlp == Mlp::moe && m_.moe.norms_apart) {
    own_norm(prefix + "pre_shared_expert_layernorm.", m_.hidden_size);
    own_norm(prefix + "post_ffn_layernorm.", m_.hidden_size);
  }
  if (const std::int64_t p = m_.per_layer_input.size; p > 0) {
    add(prefix + "per_layer_input_gate.weight", {p, m_.hidden_size});
    add(prefix + "per_layer_projection.weight", {m_.hidden_size, p});
    own_norm(prefix + "post_per_layer_input_norm.", m_.hidden_size);
  }
}

void ParamEmitter::attention(const std::string& p, const LayerSpec& layer, bool fused_norm) {
  const std::int64_t h = m_.hidden_size;
  const std::int64_t tp = s_.tp;
  const std::int64_t heads = m_.attention_heads(layer);
  const std::string a = p + "self_attention.";
  if (m_.mla || m_.local_spec) norm(p + "input_layernorm.", h);
  if (m_.softmax_offset || layer.softmax_offset) {
    add(a + "core_attention.softmax_offset", {heads / tp});
  }
  if (m_.dsa) {
    sparse_mla(a, layer);
    return;
  }
  if (m_.mla) {
    mla(a);
    return;
  }
  const std::int64_t d = m_.head_dim(layer);
  const std::int64_t v = m_.v_head_dim > 0 ? m_.v_head_dim : d;
  linear(a + "linear_proj.", h, heads * v / tp, m_.add_bias_linear);
  if (m_.post_linear_norms) norm(a + "linear_proj.post_layernorm.", h);
  const std::int64_t gate = m_.attention_output_gate ? heads : 0;
  if (fused_norm && m_.pre_linear_norms && !m_.local_spec) this->fused_norm(a + "linear_qkv.", h);
  linear(a + "linear_qkv.", ((heads + gate) * d + m_.query_groups(layer) * (d + v)) / tp, h,
         m_.add_bias_linear || m_.add_qkv_bias);
  if (m_.qk_layernorm_split) {
    const std::int64_t groups = m_.query_groups(layer);
    norm(a + "q_layernorm.", heads * d / tp);
    norm(a + "k_layernorm.", groups >= tp ? groups * d / tp : d);
  } else if (m_.qk_layernorm) {
    const std::int64_t n = m_.qk_layernorm_all_heads ? heads * d : d;
    norm(a + "q_layernorm.", n);
    norm(a + "k_layernorm.", n);
  }
}

/// Multi-latent attention: with qk_layernorm, the query and key/value up projections
/// (linear_q_proj without query compression) fuse their norms.
void ParamEmitter::mla(const std::string& a) {
  const MlaSpec& mla = *m_.mla;
  const std::int64_t h = m_.hidden_size;
  const std::int64_t tp = s_.tp;
  const std::int64_t heads = m_.num_attention_heads;
  linear(a + "linear_proj.", h, heads * mla.v_head_dim / tp, m_.add_bias_linear);
  const std::int64_t q_out = heads * (mla.qk_head_dim + mla.qk_pos_emb_head_dim) / tp;
  if (mla.q_lora_rank > 0) {
    linear(a + "linear_q_down_proj.", mla.q_lora_rank, h, false);
    if (m_.qk_layernorm) fused_norm(a + "linear_q_up_proj.", mla.q_lora_rank);
    linear(a + "linear_q_up_proj.", q_out, mla.q_lora_rank, false);
  } else {
    if (m_.qk_layernorm) fused_norm(a + "linear_q_proj.", h);
    linear(a + "linear_q_proj.", q_out, h, false);
  }
  linear(a + "linear_kv_down_proj.", mla.kv_lora_rank + mla.qk_pos_emb_head_dim, h, false);
  if (m_.qk_layernorm) fused_norm(a + "linear_kv_up_proj.", mla.kv_lora_rank);
  linear(a + "linear_kv_up_proj.", heads * (mla.qk_head_dim + mla.v_head_dim) / tp,
         mla.kv_lora_rank, false);
}

/// Sparse attention (absorbed MLA with DSAttention): the indexer (core_attention's, duplicated
/// on every tensor-parallel rank, with a LayerNorm on its keys) on layers that compute their own
/// top-k, linear_proj, the projections without fused norms, then the query and key/value norms
/// apart (the indexer reads the normalized query).
void ParamEmitter::sparse_mla(const std::string& a, const LayerSpec& layer) {
  const MlaSpec& mla = *m_.mla;
  const DsaSpec& dsa = *m_.dsa;
  const std::int64_t h = m_.hidden_size;
  const std::int64_t tp = s_.tp;
  const std::int64_t heads = m_.num_attention_heads;
  if (!layer.shares_topk) {
    const std::string x = a + "core_attention.indexer.";
    linear(x + "linear_wq_b.", dsa.index_heads * dsa.index_head_dim, mla.q_lora_rank, false);
    linear(x + "linear_wk.", dsa.index_head_dim, h, false);
    add(x + "k_norm.weight", {dsa.index_head_dim});
    add(x + "k_norm.bias", {dsa.index_head_dim});
    linear(x + "linear_weights_proj.", dsa.index_heads, h, false);
  }
  linear(a + "linear_proj.", h, heads * mla.v_head_dim / tp, false);
  linear(a + "linear_q_down_proj.", mla.q_lora_rank, h, false);
  linear(a + "linear_q_up_proj.", heads * (mla.qk_head_dim + mla.qk_pos_emb_head_dim) / tp,
         mla.q_lora_rank, false);
  linear(a + "linear_kv_down_proj.", mla.kv_lora_rank + mla.qk_pos_emb_head_dim, h, false);
  linear(a + "linear_kv_up_proj.", heads * (mla.qk_head_dim + mla.v_head_dim) / tp,
         mla.kv_lora_rank, false);
  if (m_.qk_layernorm) {
    norm(a + "q_layernorm.", mla.q_lora_rank);
    norm(a + "kv_layernorm.", mla.kv_lora_rank);
  }
}

/// A Mamba-2 mixer: its own conv, dt, A and D params first, then in_proj (with the layer's
/// norm fused unless the layer has its own, never Muon-managed), the gated norm and out_proj.
void ParamEmitter::mamba(const std::string& x, bool fused_norm) {
  const MambaSpec& mamba = m_.mamba;
  const std::int64_t tp = s_.tp;
  const std::int64_t h = m_.hidden_size;
  const std::int64_t inner = mamba.inner(h);
  const std::int64_t heads = mamba.heads(h);
  const std::int64_t state = mamba.num_groups * mamba.state_dim;
  const std::int64_t conv = (inner + 2 * state) / tp;
  add(x + "conv1d_weight", {conv, 1, mamba.conv_kernel});
  add(x + "conv1d_bias", {conv});
  add(x + "dt_bias", {heads / tp});
  add(x + "A_log", {heads / tp});
  add(x + "D", {heads / tp});
  if (fused_norm) this->fused_norm(x + "in_proj.", h);
  add(x + "in_proj.weight", {(2 * inner + 2 * state + heads) / tp, h}).use_muon = false;
  if (mamba.gated_norm) add(x + "norm.weight", {inner / tp});
  add(x + "out_proj.weight", {h, inner / tp});
}

/// Linear attention (gated delta net): dt and A first, then in_proj (with the layer's norm
/// fused), the depthwise conv, the output norm and out_proj; no biases.
void ParamEmitter::gated_delta_net(const std::string& a) {
  const GatedDeltaNetSpec& g = m_.gated_delta_net;
  const std::int64_t tp = s_.tp;
  const std::int64_t qk = g.key_head_dim * g.num_key_heads;
  const std::int64_t v = g.value_head_dim * g.num_value_heads;
  add(a + "dt_bias", {g.num_value_heads / tp});
  add(a + "A_log", {g.num_value_heads / tp});
  fused_norm(a + "in_proj.", m_.hidden_size);
  add(a + "in_proj.weight", {(2 * qk + 2 * v + 2 * g.num_value_heads) / tp, m_.hidden_size});
  add(a + "conv1d.weight", {(2 * qk + v) / tp, 1, g.conv_kernel});
  norm(a + "out_norm.", g.value_head_dim);
  add(a + "out_proj.weight", {m_.hidden_size, v / tp});
}

/// A heterogeneous model's linear stand-in for a mixer or MLP (with its norm fused).
void ParamEmitter::linear_replacement(const std::string& prefix) {
  fused_norm(prefix, m_.hidden_size);
  linear(prefix, m_.hidden_size / s_.tp, m_.hidden_size, m_.add_bias_linear);
}

/// linear_fc1 (gate and up under a gated linear unit) and linear_fc2.
void ParamEmitter::dense_mlp(const std::string& m, std::int64_t ffn) {
  const std::int64_t fc1 = m_.gated_linear_unit ? 2 : 1;
  linear(m + "linear_fc1.", fc1 * ffn / s_.tp, m_.hidden_size, m_.add_bias_linear);
  linear(m + "linear_fc2.", m_.hidden_size, ffn / s_.tp, m_.add_bias_linear);
}

void ParamEmitter::moe(const std::string& p) {
  const MoeSpec& moe = m_.moe;
  const std::int64_t h = m_.hidden_size;
  const std::string m = p + "mlp.";
  norm(p + "pre_mlp_layernorm.", h);
  linear(m + "router.", moe.num_experts, h, m_.add_bias_linear);
  if (moe.router_scales) {
    add(m + "router.per_expert_scale", {moe.num_experts});
    add(m + "router.scale", {h});
  }
  if (moe.latent_size > 0) {
    linear(m + "fc1_latent_proj.", moe.latent_size, h, m_.add_bias_linear);
    linear(m + "fc2_latent_proj.", h, moe.latent_size, m_.add_bias_linear);
  }
  experts(m + "experts.");
  if (moe.shared_expert_size > 0) {
    const std::string shared = m + "shared_experts.";
    if (moe.shared_expert_gate) add(shared + "gate_weight", {1, h});
    dense_mlp(shared, moe.shared_expert_size);
  }
  if (moe.norms_apart) {
    own_norm(m + "post_moe_layernorm.", h);
    own_norm(m + "post_shared_expert_layernorm.", h);
  }
}

/// Routed experts read and write the latent size where the MoE has latent projections.
void ParamEmitter::experts(const std::string& e) {
  const std::int64_t h = m_.moe.latent_size > 0 ? m_.moe.latent_size : m_.hidden_size;
  const std::int64_t ffn = m_.moe.ffn_hidden_size;
  const std::int64_t fc1 = (m_.gated_linear_unit ? 2 : 1) * ffn / s_.etp;
  const std::int64_t fc2_in = ffn / s_.etp;
  const std::size_t first = out_.params.size();
  if ((m_.moe.grouped_gemm && !m_.local_spec) || m_.hybrid) {
    grouped_experts(e, fc1, fc2_in);
  } else {
    for (std::int64_t i = 0; i < m_.moe.num_experts / s_.ep; ++i) {
      const std::string x = fmt::format("{}local_experts.{}.", e, i);
      linear(x + "linear_fc1.", fc1, h, m_.add_bias_linear);
      linear(x + "linear_fc2.", h, fc2_in, m_.add_bias_linear);
    }
  }
  for (std::size_t i = first; i < out_.params.size(); ++i) {
    out_.params[i].expert_parallel = s_.experts_apart();
  }
}

/// TE's grouped linears register weight<i> and bias<i> in turn, for each local expert.
void ParamEmitter::grouped_experts(const std::string& e, std::int64_t fc1, std::int64_t fc2_in) {
  const std::int64_t h = m_.moe.latent_size > 0 ? m_.moe.latent_size : m_.hidden_size;
  const std::int64_t local = m_.moe.num_experts / s_.ep;
  const bool bias = m_.add_bias_linear;
  for (std::int64_t i = 0; i < local; ++i) {
    add(fmt::format("{}linear_fc1.weight{}", e, i), {fc1, h});
    if (bias) add(fmt::format("{}linear_fc1.bias{}", e, i), {fc1});
  }
  for (std::int64_t i = 0; i < local; ++i) {
    add(fmt::format("{}linear_fc2.weight{}", e, i), {h, fc2_in});
    if (bias) add(fmt::format("{}linear_fc2.bias{}", e, i), {h});
  }
}

}  // namespace paramlayout::model
