// Step-3.5 (Step3p5ForCausalLM), as Megatron-Bridge's step35 bridge builds it with its own
// decoder layer (Step35DecoderLayer): each layer that `layer_types` calls "sliding_attention"
// takes the sliding layers' heads, key/value heads and head size (`attention_other_setting` over
// Bridge's defaults of 96, 8 and 128), the others the model's; MoE on the layers
// `moe_layers_enum` lists, with a shared expert; dense multi-token prediction layers, typed by
// the entries of `layer_types` past the decoder's, looked up (as Bridge's layer does) after the
// decoder layers before their pipeline chunk too: on a later stage, full attention. The
// head-wise attention gate becomes Megatron-LM's full output gate (one gate per query channel),
// which d98e8a64 offers in its place. Absent fields take Bridge's Step35Config defaults
// (Step-3.5-Flash's).
#include <fmt/format.h>

#include <charconv>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {
namespace {

/// `moe_layers_enum`: a list of layer indices, or the same as a comma-separated string.
std::vector<std::int64_t> read_moe_layers(Config& c) {
  std::vector<std::int64_t> layers;
  if (!c.has("moe_layers_enum")) {
    for (std::int64_t i = 3; i < 45; ++i) layers.push_back(i);  // Step35Config's default
    return layers;
  }
  std::optional<json::Element> e = c.find("moe_layers_enum");
  if (!e->is_string()) return c.integers("moe_layers_enum");
  const std::string text = c.string("moe_layers_enum", "");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    if (end > start) {
      std::int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + end, v);
      if (ec != std::errc() || ptr != text.data() + end || v < 0) {
        c.fail("moe_layers_enum",
               fmt::format("expected comma-separated layer indices, got \"{}\"", excerpt(text)));
        return {};
      }
      layers.push_back(v);
    }
    start = end + 1;
  }
  return layers;
}

/// The sliding layers' attention: Bridge's defaults, overlaid by `attention_other_setting`
/// where its `attention_type` is "sliding_attention".
LayerSpec read_sliding_attention(Config& c) {
  LayerSpec sliding;
  sliding.num_attention_heads = 96;
  sliding.num_query_groups = 8;
  sliding.kv_channels = 128;
  std::optional<json::Element> other = c.find("attention_other_setting");
  if (!other || !other->is_object()) return sliding;
  const json::Path at = c.path("attention_other_setting");
  std::string_view type;
  auto t = other->at_key("attention_type");
  if (t.error() || t.value().get(type) != simdjson::SUCCESS || type != "sliding_attention") {
    return sliding;
  }
  const auto field = [&](std::string_view key, std::int64_t& out) {
    auto v = other->at_key(key);
    if (!v.error()) out = c.reader().integer(v.value(), at.field(key), 1, kMaxDimension);
  };
  field("num_attention_heads", sliding.num_attention_heads);
  field("num_attention_groups", sliding.num_query_groups);
  field("head_dim", sliding.kv_channels);
  return sliding;
}

}  // namespace

void map_step3p5(Config& c, ModelSpec& m, Notes& notes) {
  m.hidden_size = c.integer("hidden_size", 4096, 1);
  m.layers.assign(static_cast<std::size_t>(c.integer("num_hidden_layers", 45, 1)), LayerSpec{});
  m.num_attention_heads = c.integer("num_attention_heads", 64, 1);
  // Bridge's mapping reads num_key_value_heads first, then num_attention_groups.
  m.num_query_groups = c.has("num_key_value_heads") ? c.integer("num_key_value_heads")
                                                    : c.integer("num_attention_groups", 8, 1);
  m.kv_channels = c.integer("head_dim", 128, 1);
  m.vocab_size = c.integer("vocab_size", 128815, 1);
  // Step35Config has no tie_word_embeddings of its own: absent, GPTModelProvider ties them.
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", true);
  m.ffn_hidden_size = c.integer("intermediate_size", 11264, 1);
  m.gated_linear_unit = true;
  m.normalization = Normalization::rms_norm;
  m.position_embedding = PositionEmbedding::rope;
  m.add_bias_linear = false;
  m.qk_layernorm = c.boolean("use_qk_norm", false);
  const bool head_wise = c.boolean("use_head_wise_attn_gate", true);
  m.attention_output_gate = head_wise || c.boolean("attention_output_gate", false);
  m.mtp_num_layers = c.integer("num_nextn_predict_layers", 3, 0);

  m.moe.grouped_gemm = true;
  m.moe.num_experts = c.integer("moe_num_experts", 288, 1);
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size", 1280, 1);
  // Bridge maps share_expert_dim before share_expert_dims; the first present wins.
  m.moe.shared_expert_size = c.has("share_expert_dim") ? c.integer("share_expert_dim")
                                                       : c.integer("share_expert_dims", 1280, 1);
  if (c.is_null("moe_layers_enum")) {
    c.fail("moe_layers_enum",
           "is null: Megatron-Bridge then builds Step-3.5 without its own layers, which "
           "paramlayout does not follow");
    return;
  }
  for (std::int64_t layer : read_moe_layers(c)) {
    if (layer < m.num_layers()) m.layers[static_cast<std::size_t>(layer)].mlp = Mlp::moe;
  }

  const LayerSpec sliding = read_sliding_attention(c);
  // Step35Config splits a list of decoder and MTP layers' types in two; Bridge joins them again.
  std::vector<std::string> types = c.strings("layer_types");
  if (types.size() == m.layers.size()) {
    for (std::string& type : c.strings("mtp_layer_types")) types.push_back(std::move(type));
  }
  const auto typed = [&](std::size_t index, LayerSpec layer) {
    if (index < types.size() && types[index] == "sliding_attention") {
      layer.num_attention_heads = sliding.num_attention_heads;
      layer.num_query_groups = sliding.num_query_groups;
      layer.kv_channels = sliding.kv_channels;
    }
    return layer;
  };
  for (std::size_t i = 0; i < m.layers.size(); ++i) m.layers[i] = typed(i, m.layers[i]);
  // Step35DecoderLayer looks an MTP layer up at num_layers + the decoder layers before its
  // pipeline chunk + its index: past layer_types' end (on a later stage), the model's own.
  m.mtp_kinds_after_stage_offset = true;
  for (std::size_t k = m.layers.size(); k < types.size(); ++k) {
    m.mtp_layer_kinds.push_back(typed(k, LayerSpec{}));
  }

  if (head_wise) {
    notes.push_back(fmt::format(
        "use_head_wise_attn_gate: Megatron-LM at d98e8a64 has no head-wise gate, and Bridge "
        "gives linear_qkv the full output gate instead, one gate per query channel: each "
        "attention layer's g_proj ({} x heads) becomes heads x {} rows of linear_qkv",
        group_digits(m.hidden_size), m.kv_channels));
  }
  if (c.boolean("use_moe_router_bias", false)) note_expert_bias(m, notes, "moe.router_bias");
}

}  // namespace paramlayout::hf
