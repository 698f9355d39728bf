// The model description: the fields of Megatron-LM's TransformerConfig and GPTModel (or
// HybridModel) that decide each trainable param's name, shape and attributes. Front ends (a
// Hugging Face config.json, Megatron-LM's own arguments) fill it; the chunk builder reads
// nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace paramlayout {

/// `normalization`: LayerNorm has a bias, RMSNorm does not.
enum class Normalization : std::uint8_t { layer_norm, rms_norm };

/// What mixes tokens in a decoder layer.
enum class Mixer : std::uint8_t {
  none,             ///< no mixer (an MLP-only layer)
  attention,        ///< self-attention: standard (linear_qkv) or multi-latent, per the model
  mamba,            ///< a Mamba-2 mixer
  gated_delta_net,  ///< linear attention (Qwen3-Next)
  linear,           ///< one linear layer in its place (heterogeneous models)
  /// A Mamba-2 mixer and self-attention side by side on one normalized input (Falcon-H1's
  /// parallel layer): `norm`, `mamba_mixer` and `self_attention`, neither fusing a norm.
  mamba_and_attention,
};

/// What follows the mixer in a decoder layer.
enum class Mlp : std::uint8_t {
  none,
  dense,
  moe,
  linear,  ///< one linear layer in its place (heterogeneous models)
};

/// One decoder layer. Sizes of 0 take the model's.
struct LayerSpec {
  Mixer mixer = Mixer::attention;
  Mlp mlp = Mlp::dense;
  std::int64_t ffn_hidden_size = 0;      ///< dense MLP size (heterogeneous models vary it)
  std::int64_t num_query_groups = 0;     ///< key/value heads (heterogeneous models vary it)
  std::int64_t num_attention_heads = 0;  ///< query heads (Step-3.5's sliding layers vary it)
  std::int64_t kv_channels = 0;          ///< head dim (Step-3.5's sliding layers vary it)
  /// Sparse attention: the layer reuses an earlier layer's top-k, so builds no indexer.
  bool shares_topk = false;
  /// The layer's attention has learned sinks (core_attention.softmax_offset), as every layer
  /// does with the model's `softmax_offset`.
  bool softmax_offset = false;

  /// Whether the layer has self-attention (alone or beside a Mamba mixer).
  bool attends() const { return mixer == Mixer::attention || mixer == Mixer::mamba_and_attention; }

  bool operator==(const LayerSpec&) const = default;
};

/// Multi-latent attention (DeepSeek-V2/V3) sizes.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;  ///< 0: no query compression (linear_q_proj)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 0;          ///< the no-position part of a query/key head
  std::int64_t qk_pos_emb_head_dim = 0;  ///< the rotary part
  std::int64_t v_head_dim = 0;

  bool operator==(const MlaSpec&) const = default;
};

/// DeepSeek sparse attention (DSA) over multi-latent attention: a lightning indexer in each
/// attention layer that computes its own top-k (Megatron-LM's absorbed MLA with DSAttention).
struct DsaSpec {
  std::int64_t index_heads = 0;     ///< dsa_indexer_n_heads
  std::int64_t index_head_dim = 0;  ///< dsa_indexer_head_dim

  bool operator==(const DsaSpec&) const = default;
};

/// Mixture-of-experts sizes, for layers whose MLP is `moe`.
struct MoeSpec {
  std::int64_t num_experts = 0;
  std::int64_t ffn_hidden_size = 0;     ///< each routed expert's MLP size
  std::int64_t shared_expert_size = 0;  ///< moe_shared_expert_intermediate_size; 0: none
  /// Experts each token is routed to, where the config says (num_experts_per_tok); 0: not said.
  std::int64_t router_topk = 0;
  bool shared_expert_gate = false;  ///< shared_experts.gate_weight
  /// experts.linear_fc1.weight<e> (TEGroupedMLP), else
  /// experts.local_experts.<e>.linear_fc1.weight (SequentialMLP). Hybrid models always group.
  bool grouped_gemm = false;
  /// moe_latent_size: the experts work in this size between mlp.fc1_latent_proj and
  /// mlp.fc2_latent_proj; 0: none.
  std::int64_t latent_size = 0;
  /// The router also learns a scale per expert and one per hidden channel
  /// (router.per_expert_scale, router.scale: Megatron-Bridge's Gemma4TopKRouter).
  bool router_scales = false;
  /// The routed and the shared experts normalize their outputs apart (mlp.post_moe_layernorm,
  /// mlp.post_shared_expert_layernorm), and the layer the shared experts' input and the MoE's
  /// output (pre_shared_expert_layernorm, post_ffn_layernorm, after the MLP): Megatron-Bridge's
  /// Gemma4MoELayer and Gemma4TransformerLayer.
  bool norms_apart = false;
  /// The router keeps an expert bias (--moe-router-enable-expert-bias): registered buffers,
  /// not params.
  bool router_expert_bias = false;
  /// The routers keep global token counts (global_aux_loss with a coefficient > 0: a Hugging
  /// Face model's balancing as its Megatron-Bridge provider sets it).
  bool router_global_aux_loss = false;

  bool operator==(const MoeSpec&) const = default;
};

/// Mamba-2 mixer sizes.
struct MambaSpec {
  std::int64_t state_dim = 128;  ///< d_state
  std::int64_t head_dim = 64;
  std::int64_t num_groups = 8;   ///< B/C groups
  std::int64_t num_heads = 0;    ///< 0: 2 x hidden / head_dim
  std::int64_t conv_kernel = 4;  ///< d_conv
  bool gated_norm = true;        ///< rmsnorm: the gated norm before out_proj

  std::int64_t inner(std::int64_t hidden) const;  ///< d_inner
  std::int64_t heads(std::int64_t hidden) const;

  bool operator==(const MambaSpec&) const = default;
};

/// Gated delta net (linear attention) sizes.
struct GatedDeltaNetSpec {
  std::int64_t key_head_dim = 128;
  std::int64_t num_key_heads = 16;
  std::int64_t value_head_dim = 128;
  std::int64_t num_value_heads = 32;
  std::int64_t conv_kernel = 4;

  bool operator==(const GatedDeltaNetSpec&) const = default;
};

/// Per-layer input embeddings (Gemma 4's, as Megatron-Bridge builds them): the first stage
/// embeds every token once more for all layers (per_layer_embedding: `vocab_size` rows of
/// layers x `size`, split over tp by rows), projects the hidden state likewise
/// (per_layer_model_proj, split over tp by rows) and normalizes each layer's part
/// (per_layer_proj_norm); each layer gates and projects its part back (per_layer_input_gate,
/// per_layer_projection, neither split) and normalizes it (post_per_layer_input_norm).
struct PerLayerInputSpec {
  std::int64_t size = 0;  ///< hidden_size_per_layer_input; 0: none
  std::int64_t vocab_size = 0;

  bool operator==(const PerLayerInputSpec&) const = default;
};

/// `position_embedding_type`: only learned absolute positions are params.
enum class PositionEmbedding : std::uint8_t { learned_absolute, rope, none };

/// A GPT-style model as Megatron-LM builds it (GPTModel, or HybridModel for hybrids).
/// Defaults are Megatron-LM's.
struct ModelSpec {
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;  ///< dense MLP size
  std::int64_t num_attention_heads = 0;
  std::int64_t num_query_groups = 0;  ///< key/value heads; 0: as many as attention heads
  std::int64_t kv_channels = 0;       ///< head dim; 0: hidden / heads
  std::int64_t v_head_dim = 0;        ///< value head dim where it is not the head dim; 0: same
  bool gated_linear_unit = false;     ///< SwiGLU / GeGLU: linear_fc1 holds gate and up
  Normalization normalization = Normalization::layer_norm;
  bool qk_layernorm = false;
  /// The q/k norms span every head's channels (OLMoE), not one head's; never split.
  bool qk_layernorm_all_heads = false;
  /// The q/k norms span all heads and are split tp ways with them (MiniMax-M2's full-dimension
  /// norms): the query norm heads x head_dim / tp, the key norm key/value heads x head_dim / tp, or
  /// one head's where tp exceeds the key/value heads.
  bool qk_layernorm_split = false;
  /// linear_qkv and the dense MLP's linear_fc1 normalize their inputs (a fused
  /// `layer_norm_weight`); false in post-norm-only models (EXAONE 4).
  bool pre_linear_norms = true;
  /// linear_proj and the dense MLP's linear_fc2 normalize their outputs
  /// (`post_layernorm`: Gemma 2 and 3).
  bool post_linear_norms = false;
  bool add_bias_linear = true;  ///< biases on linear_proj, linear_qkv, the MLPs, the router
  bool add_qkv_bias = false;    ///< a bias on linear_qkv alone
  /// --transformer-impl local: Megatron-Core's own modules (gpt_layer_specs.py:359-464):
  /// the layer norms are modules of their own (input_layernorm, pre_mlp_layernorm), not fused
  /// into linear_qkv / linear_fc1, and experts are always a SequentialMLP.
  bool local_spec = false;
  /// The layer normalizes the attention's and the MLP's outputs with norms of its own
  /// (post_self_attn_layernorm, post_mlp_layernorm), registered after the MLP (Gemma 4's dense
  /// layer, Megatron-Bridge's Gemma4DenseTransformerLayer).
  bool sublayer_output_norms = false;
  PerLayerInputSpec per_layer_input;
  bool softmax_offset = false;         ///< learned attention sinks: core_attention.softmax_offset
  bool attention_output_gate = false;  ///< linear_qkv also computes a gate per head
  std::optional<MlaSpec> mla;          ///< multi-latent attention
  std::optional<DsaSpec> dsa;          ///< sparse attention over the multi-latent attention
  MoeSpec moe;
  MambaSpec mamba;
  GatedDeltaNetSpec gated_delta_net;
  std::vector<LayerSpec> layers;    ///< the decoder layers, in order
  std::int64_t mtp_num_layers = 0;  ///< multi-token prediction layers
  /// GPT models: the layer each multi-token prediction layer holds where it is not a copy of the
  /// last decoder layer (EXAONE-MoE's are dense), by index; the last entry holds for the layers
  /// after it (Step-3.5's differ from one to the next).
  std::vector<LayerSpec> mtp_layer_kinds;
  /// `mtp_layer_kinds` is looked up at the MTP layer's index plus the decoder layers before its
  /// pipeline chunk, and past its end the model's own layer (full attention, dense MLP) holds:
  /// Step-3.5's decoder layer (Megatron-Bridge's) indexes its per-layer settings so.
  bool mtp_kinds_after_stage_offset = false;
  /// Hybrid models: the layers each multi-token prediction layer holds (GPT models hold a
  /// copy of the last decoder layer).
  std::vector<LayerSpec> hybrid_mtp_layers;
  bool untie_embeddings_and_output_weights = false;
  PositionEmbedding position_embedding = PositionEmbedding::learned_absolute;
  /// The share of each head's channels its rotary embedding turns (--rotary-percent; a
  /// Hugging Face config's partial_rotary_factor): no param, the size of its tables.
  double rotary_percent = 1.0;
  std::int64_t max_position_embeddings = 0;  ///< rows of learned absolute positions
  std::int64_t vocab_size = 0;
  std::int64_t make_vocab_size_divisible_by = 128;
  /// The vocab is padded to a multiple of make_vocab_size_divisible_by x tp (Megatron-LM's
  /// rule); false: of make_vocab_size_divisible_by alone, even where the launch line asks for no
  /// padding (Megatron-Bridge's Gemma 4 dense provider pads it so itself).
  bool vocab_padding_times_tp = true;
  /// The builder refuses a pipeline split or virtual chunks (Megatron-Bridge's Gemma 4 dense
  /// provider builds one stage only): its reason.
  std::string one_stage_only;
  bool hybrid = false;  ///< a HybridModel (Mamba hybrids): one mixer or MLP per layer

  std::int64_t num_layers() const { return static_cast<std::int64_t>(layers.size()); }
  std::int64_t query_groups(const LayerSpec& layer) const;
  std::int64_t head_dim() const;
  std::int64_t attention_heads(const LayerSpec& layer) const;
  std::int64_t head_dim(const LayerSpec& layer) const;
  std::int64_t dense_ffn(const LayerSpec& layer) const;
  /// The layer multi-token prediction layer `index` holds, in a pipeline chunk after
  /// `stage_offset` decoder layers: from `mtp_layer_kinds`, else a copy of the last decoder layer.
  LayerSpec mtp_layer(std::int64_t index, std::int64_t stage_offset = 0) const;
  /// A hybrid model's: the layers one multi-token prediction layer holds; a GPT model's: the
  /// layer each holds, in order (none without them).
  std::vector<LayerSpec> mtp_layer_specs() const;
  /// Whether any decoder or multi-token prediction layer has self-attention / a Mamba mixer
  /// (alone or side by side).
  bool uses_attention() const;
  bool uses_mamba() const;
  /// Whether any decoder or multi-token prediction layer has this mixer / MLP.
  bool uses(Mixer mixer) const;
  bool uses(Mlp mlp) const;
};

/// The first field of `model` that no Megatron-LM model could have (sizes < 1, kv heads
/// that do not divide the heads, ...), as "hidden_size must be in [1, 2147483647], got 0".
std::optional<std::string> model_problem(const ModelSpec& model);

}  // namespace paramlayout
