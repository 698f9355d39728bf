// Gemma 4, as Megatron-Bridge's gemma4 bridge builds it: two providers, by `enable_moe_block`.
// Each layer that `layer_types` calls "full_attention" (transformers forces the last one so) has
// the global attention's head size (`global_head_dim`) and key/value heads
// (`num_global_key_value_heads`, else the model's); every layer has q/k norms of one head.
//
// Dense (Gemma4DenseProvider): Megatron-Core's local layer with Bridge's own norms (input,
// pre-MLP, then the attention's and the MLP's output norms after the MLP), GeGLU MLPs that are
// twice as wide on the last `num_kv_shared_layers` layers with `use_double_wide_mlp`, per-layer
// inputs of `hidden_size_per_layer_input` over `vocab_size_per_layer_input` rows, tied
// embeddings always, the vocab padded to make_vocab_size_divisible_by alone, one pipeline stage.
//
// MoE (Gemma4ModelProvider): Transformer Engine's layer with Gemma 3's output norm on
// linear_proj, a mixture of `num_experts` experts of `moe_intermediate_size` on every layer
// with a shared expert of `intermediate_size`, the router's learned scales and the MoE's own
// norms (Gemma4TopKRouter, Gemma4MoELayer). It builds no per-layer inputs, no double-wide MLP.
//
// Layers that share keys and values (the last num_kv_shared_layers) and global layers whose
// keys are their values (`attention_k_eq_v`) keep Megatron-LM's whole linear_qkv and k norm:
// Bridge fills the projections the checkpoint lacks on loading. Absent fields take
// transformers' Gemma4TextConfig defaults, as the bridge reads the config object.
#include <fmt/format.h>

#include <limits>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {
namespace {

/// `layer_types` as transformers' Gemma4TextConfig leaves it: absent, every sixth layer full;
/// the last layer always full. True: sliding.
std::vector<bool> read_sliding_layers(Config& c, std::size_t layers) {
  std::vector<bool> sliding(layers);
  const std::vector<std::string> types = c.strings("layer_types");
  if (!types.empty() && types.size() != layers) {
    c.fail("layer_types", fmt::format("has {} entries for {} layers", types.size(), layers));
    return sliding;
  }
  for (std::size_t i = 0; i < layers; ++i) {
    if (types.empty()) {
      sliding[i] = (i + 1) % 6 != 0;
    } else if (types[i] == "sliding_attention" || types[i] == "full_attention") {
      sliding[i] = types[i] == "sliding_attention";
    } else {
      c.fail("layer_types", fmt::format("names \"{}\"; Gemma 4 has sliding_attention and "
                                        "full_attention layers",
                                        excerpt(types[i])));
      return sliding;
    }
  }
  if (layers > 0) sliding.back() = false;
  return sliding;
}

/// Elements Megatron-LM's layers hold and the checkpoint does not: the key and value
/// projections and key norm of the layers that share keys and values (`shared`), and the value
/// projections of global layers whose keys are their values (`values`).
struct SynthesizedKv {
  std::int64_t shared = 0;
  std::int64_t values = 0;
};

/// a x b + c, or INT64_MAX where it does not fit (a fuzzed config's sizes).
std::int64_t saturating_mul_add(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out) || __builtin_add_overflow(out, c, &out)) {
    return std::numeric_limits<std::int64_t>::max();
  }
  return out;
}

SynthesizedKv synthesized_kv(const ModelSpec& m, std::int64_t first_shared, bool k_eq_v,
                             const std::vector<bool>& sliding) {
  SynthesizedKv n;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    const std::int64_t kv = saturating_mul_add(
        saturating_mul_add(m.query_groups(l), m.head_dim(l), 0), m.hidden_size, 0);
    if (static_cast<std::int64_t>(i) >= first_shared) {
      n.shared = saturating_mul_add(2, kv, saturating_mul_add(1, n.shared, m.head_dim(l)));
    } else if (k_eq_v && !sliding[i]) {
      n.values = saturating_mul_add(1, n.values, kv);
    }
  }
  return n;
}

}  // namespace

void map_gemma4(Config& c, ModelSpec& m, Notes& notes) {
  m.hidden_size = c.integer("hidden_size", 2304, 1);
  const std::int64_t layers = c.integer("num_hidden_layers", 30, 1);
  m.layers.assign(static_cast<std::size_t>(layers), LayerSpec{});
  m.num_attention_heads = c.integer("num_attention_heads", 8, 1);
  m.num_query_groups = c.integer("num_key_value_heads", 4, 1);
  m.kv_channels = c.integer("head_dim", 256, 1);
  m.vocab_size = c.integer("vocab_size", 262144, 1);
  m.ffn_hidden_size = c.integer("intermediate_size", 9216, 1);
  m.gated_linear_unit = true;
  m.normalization = Normalization::rms_norm;
  m.position_embedding = PositionEmbedding::rope;
  m.add_bias_linear = false;
  m.qk_layernorm = true;
  m.moe.grouped_gemm = true;
  const bool tied = c.boolean("tie_word_embeddings", true);

  const std::int64_t global_head_dim = c.integer("global_head_dim", 512, 1);
  const std::int64_t global_groups =
      c.is_null("num_global_key_value_heads")
          ? m.num_query_groups
          : c.integer("num_global_key_value_heads", m.num_query_groups, 1);
  const bool k_eq_v = c.boolean("attention_k_eq_v", false);
  const std::vector<bool> sliding = read_sliding_layers(c, m.layers.size());
  if (c.failed()) return;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (sliding[i]) continue;
    m.layers[i].kv_channels = global_head_dim;
    m.layers[i].num_query_groups = global_groups;
  }
  const std::int64_t shared_kv = c.integer("num_kv_shared_layers", 0, 0);
  // transformers (and the checkpoint) share nothing when more layers share than there are.
  const std::int64_t first_shared =
      shared_kv > 0 && shared_kv <= layers ? layers - shared_kv : layers;
  const bool double_wide = c.boolean("use_double_wide_mlp", false);
  const std::int64_t per_layer_size = c.integer("hidden_size_per_layer_input", 256, 0);
  const std::int64_t per_layer_vocab = c.integer("vocab_size_per_layer_input", m.vocab_size, 1);

  if (c.boolean("enable_moe_block", false)) {
    m.add_qkv_bias = c.boolean("attention_bias", false);
    m.untie_embeddings_and_output_weights = !tied;
    m.post_linear_norms = true;  // linear_proj's post_layernorm (the dense MLP has none here)
    m.moe.num_experts = c.is_null("num_experts") ? 128 : c.integer("num_experts", 128, 1);
    m.moe.ffn_hidden_size =
        c.is_null("moe_intermediate_size") ? 704 : c.integer("moe_intermediate_size", 704, 1);
    m.moe.shared_expert_size = m.ffn_hidden_size;
    m.moe.router_scales = true;
    m.moe.norms_apart = true;
    for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
    if (per_layer_size > 0) {
      notes.push_back(fmt::format(
          "hidden_size_per_layer_input {}: Megatron-Bridge's Gemma 4 MoE provider builds no "
          "per-layer inputs",
          per_layer_size));
    }
    if (double_wide && shared_kv > 0) {
      notes.emplace_back(
          "use_double_wide_mlp: Megatron-Bridge's Gemma 4 MoE provider builds "
          "every shared expert at intermediate_size");
    }
  } else {
    m.local_spec = true;
    m.sublayer_output_norms = true;
    m.vocab_padding_times_tp = false;
    m.one_stage_only =
        "Megatron-Bridge's Gemma 4 dense provider builds one pipeline stage only "
        "(Gemma4DenseProvider.provide: \"currently supports PP=1 only\")";
    m.per_layer_input = {per_layer_size, per_layer_size > 0 ? per_layer_vocab : 0};
    // Bridge's Gemma4DenseMLP widens the shared layers only after a first unshared one.
    if (double_wide && first_shared > 0) {
      for (std::int64_t i = first_shared; i < layers; ++i) {
        m.layers[static_cast<std::size_t>(i)].ffn_hidden_size = 2 * m.ffn_hidden_size;
      }
    }
    if (c.has("num_experts") || c.has("moe_intermediate_size")) {
      notes.emplace_back(
          "num_experts, moe_intermediate_size: Megatron-Bridge reads them only "
          "with enable_moe_block");
    }
    if (!tied) {
      notes.emplace_back(
          "tie_word_embeddings false: Megatron-Bridge's Gemma 4 dense provider "
          "ties the embedding and output weights all the same");
    }
    if (c.boolean("attention_bias", false)) {
      notes.emplace_back(
          "attention_bias: Megatron-Bridge's Gemma 4 dense provider builds no "
          "attention biases");
    }
  }

  const SynthesizedKv extra = synthesized_kv(m, first_shared, k_eq_v, sliding);
  if (extra.shared > 0) {
    notes.push_back(fmt::format(
        "num_kv_shared_layers {}: those layers keep Megatron-LM's whole linear_qkv and "
        "k_layernorm, "
        "whose keys and values the checkpoint leaves out (Megatron-Bridge fills them on "
        "loading): {} elements more than the checkpoint",
        shared_kv, group_digits(extra.shared)));
  }
  if (extra.values > 0) {
    notes.push_back(fmt::format(
        "attention_k_eq_v: global layers keep Megatron-LM's value projection in linear_qkv, which "
        "the checkpoint leaves out (Megatron-Bridge copies the keys' on loading): {} elements "
        "more than the checkpoint",
        group_digits(extra.values)));
  }
  if (!k_eq_v && global_groups != m.num_query_groups) {
    notes.push_back(fmt::format(
        "num_global_key_value_heads {}: Megatron-Bridge gives every global layer these key/value "
        "heads, transformers only with attention_k_eq_v (else num_key_value_heads {})",
        global_groups, m.num_query_groups));
  }
}

}  // namespace paramlayout::hf
