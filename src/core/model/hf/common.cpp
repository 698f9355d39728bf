// Readers most architectures share: the Llama-style core fields, biases, which layers are
// mixtures of experts, and multi-token prediction layers.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "mappers.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::hf {

void read_llama_like(Config& c, ModelSpec& m, bool tie_default) {
  m.hidden_size = c.integer("hidden_size");
  m.layers.assign(static_cast<std::size_t>(c.integer("num_hidden_layers")), LayerSpec{});
  m.num_attention_heads = c.integer("num_attention_heads");
  m.num_query_groups = c.integer("num_key_value_heads", m.num_attention_heads, 1);
  m.kv_channels = c.integer("head_dim", 0, 1);
  m.vocab_size = c.integer("vocab_size");
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", tie_default);
  m.gated_linear_unit = true;
  m.normalization = Normalization::rms_norm;
  m.position_embedding = PositionEmbedding::rope;
  // model_bridge.py:477 (CONFIG_MAPPING): partial_rotary_factor -> rotary_percent.
  m.rotary_percent = c.number("partial_rotary_factor", 1.0);
  m.add_bias_linear = false;
  m.moe.grouped_gemm = true;
  read_mtp_layers(c, m);
}

void read_mla(Config& c, ModelSpec& m) {
  MlaSpec mla;
  mla.q_lora_rank = c.is_null("q_lora_rank") ? 0 : c.integer("q_lora_rank", 1536, 1);
  mla.kv_lora_rank = c.integer("kv_lora_rank", 512, 1);
  mla.qk_head_dim = c.integer("qk_nope_head_dim", 128, 1);
  mla.qk_pos_emb_head_dim = c.integer("qk_rope_head_dim", 64, 1);
  mla.v_head_dim = c.integer("v_head_dim", 128, 1);
  m.mla = mla;
  m.qk_layernorm = true;  // q_a_layernorm and kv_a_layernorm, fused into the up projections
}

void note_q_proj_norm(const ModelSpec& m, Notes& notes) {
  if (!m.mla || m.mla->q_lora_rank > 0 || !m.qk_layernorm) return;
  notes.push_back(fmt::format(
      "linear_q_proj: without query compression Megatron-LM's MLA fuses a norm into it (its q/k "
      "norm resolver), which the checkpoint does not have: {} elements more than the checkpoint",
      group_digits((m.num_layers() + m.mtp_num_layers) * m.hidden_size)));
}

void read_biases(Config& c, ModelSpec& m, Notes& notes) {
  const bool attention = c.boolean("attention_bias", false);
  const bool mlp = c.boolean("mlp_bias", false);
  m.add_qkv_bias = attention;
  m.add_bias_linear = mlp;
  if (attention && !mlp) {
    notes.push_back(fmt::format(
        "attention_bias: Hugging Face also biases o_proj, Megatron-LM's add_qkv_bias only "
        "linear_qkv: {} checkpoint elements have no param",
        group_digits(m.num_layers() * m.hidden_size)));
  }
  if (mlp && !attention) {
    notes.emplace_back(
        "mlp_bias: Megatron-LM's add_bias_linear also biases linear_qkv and linear_proj, "
        "which the checkpoint does not");
  }
}

void read_first_dense_moe_layers(Config& c, ModelSpec& m, std::int64_t first_dense_default) {
  const std::int64_t first_dense = c.integer("first_k_dense_replace", first_dense_default, 0);
  const std::int64_t freq = c.integer("moe_layer_freq", 1, 1);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto layer = static_cast<std::int64_t>(i);
    if (layer >= first_dense && layer % freq == 0) m.layers[i].mlp = Mlp::moe;
  }
}

void read_dense_or_moe_layers(Config& c, ModelSpec& m, std::int64_t first_dense_default) {
  read_first_dense_moe_layers(c, m, first_dense_default);
  const std::vector<std::string> types = c.strings("mlp_layer_types");
  if (types.empty()) return;
  if (types.size() != m.layers.size()) {
    c.fail("mlp_layer_types", fmt::format("has {} entries, and num_hidden_layers is {}",
                                          types.size(), m.layers.size()));
    return;
  }
  const bool first_dense_given = c.has("first_k_dense_replace");
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sparse" && types[i] != "dense") {
      c.reader().fail(
          c.path("mlp_layer_types").item(i),
          fmt::format("unknown MLP type \"{}\" (expected \"dense\" or \"sparse\")", types[i]));
      return;
    }
    const Mlp mlp = types[i] == "sparse" ? Mlp::moe : Mlp::dense;
    if (first_dense_given && mlp != m.layers[i].mlp) {
      c.reader().fail(c.path("mlp_layer_types").item(i),
                      fmt::format("is \"{}\", and first_k_dense_replace (which "
                                  "Megatron-Bridge reads) makes layer {} the other kind",
                                  types[i], i));
      return;
    }
    m.layers[i].mlp = mlp;
  }
}

std::int64_t integer_of(Config& c, std::initializer_list<std::string_view> keys) {
  std::optional<std::pair<std::string_view, std::int64_t>> given;
  for (std::string_view key : keys) {
    if (!c.in_file(key)) continue;
    const std::int64_t value = c.integer(key);
    if (!given) {
      given = {key, value};
    } else if (value != given->second) {
      c.fail(key, fmt::format("is {}, and {} is {}: both name one count", value, given->first,
                              given->second));
    }
  }
  if (given) return given->second;
  for (std::string_view key : keys) {
    if (c.has(key)) return c.integer(key);  // a class default
  }
  c.fail(*keys.begin(), "is required");
  return 1;
}

void read_sparse_step_moe_layers(Config& c, ModelSpec& m) {
  const std::int64_t step = c.integer("decoder_sparse_step", 1, 1);
  const std::vector<std::int64_t> dense = c.integers("mlp_only_layers");
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto layer = static_cast<std::int64_t>(i);
    const bool listed = std::find(dense.begin(), dense.end(), layer) != dense.end();
    if ((layer + 1) % step == 0 && !listed) m.layers[i].mlp = Mlp::moe;
  }
}

void read_mtp_layers(Config& c, ModelSpec& m) {
  m.mtp_num_layers = c.has("mtp_num_hidden_layers") ? c.integer("mtp_num_hidden_layers", 0)
                                                    : c.integer("num_nextn_predict_layers", 0, 0);
}

void note_expert_bias(ModelSpec& m, Notes& notes, std::string_view name) {
  std::int64_t layers = 0;
  for (const LayerSpec& l : m.layers) layers += l.mlp == Mlp::moe ? 1 : 0;
  // A hybrid model's MTP layers each hold all of its MTP layer specs; a GPT model's one each.
  const std::int64_t repeats = m.hybrid ? m.mtp_num_layers : 1;
  for (const LayerSpec& l : m.mtp_layer_specs()) {
    layers += l.mlp == Mlp::moe ? repeats : 0;
  }
  if (layers == 0) return;
  m.moe.router_expert_bias = true;
  notes.push_back(fmt::format(
      "the router's expert bias ({}) is a buffer in Megatron-LM, not a param: {} checkpoint "
      "elements have no param",
      name, group_digits(layers * m.moe.num_experts)));
}

}  // namespace paramlayout::hf
