// Each architecture is a small mapping from its config.json fields to the model
// description, as Megatron-Bridge's config bridges set Megatron-LM's TransformerConfig.
#include "paramlayout/hf_config.hpp"

#include <fmt/format.h>

#include <array>

#include "hf_reader.hpp"

namespace paramlayout {
namespace {

using Notes = std::vector<std::string>;
using Mapper = void (*)(hf::Config&, ModelSpec&, Notes&);

/// The fields most decoders share, under Llama's names: RMSNorm, SwiGLU, rotary
/// positions, untied embeddings unless the config ties them.
void read_llama_like(hf::Config& c, ModelSpec& m) {
  m.hidden_size = c.integer("hidden_size");
  m.layers.assign(static_cast<std::size_t>(c.integer("num_hidden_layers")), LayerSpec{});
  m.num_attention_heads = c.integer("num_attention_heads");
  m.num_query_groups = c.integer("num_key_value_heads", m.num_attention_heads, 1);
  m.kv_channels = c.integer("head_dim", 0, 1);
  m.vocab_size = c.integer("vocab_size");
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", false);
  m.gated_linear_unit = true;
  m.normalization = Normalization::rms_norm;
  m.position_embedding = PositionEmbedding::rope;
  m.add_bias_linear = false;
  m.moe.grouped_gemm = true;
}

void map_llama(hf::Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.add_qkv_bias = c.boolean("attention_bias", false);
}

void map_qwen2(hf::Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.add_qkv_bias = true;
}

void map_qwen3(hf::Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.qk_layernorm = true;
}

void map_mixtral(hf::Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.moe.num_experts = c.integer("num_local_experts");
  m.moe.ffn_hidden_size = c.integer("intermediate_size");
  for (LayerSpec& l : m.layers) l.mlp = Mlp::moe;
}

void map_qwen3_moe(hf::Config& c, ModelSpec& m, Notes&) {
  read_llama_like(c, m);
  m.qk_layernorm = true;
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("num_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  const std::int64_t step = c.integer("decoder_sparse_step", 1, 1);
  const std::vector<std::int64_t> dense = c.integers("mlp_only_layers");
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto layer = static_cast<std::int64_t>(i);
    const bool listed = std::find(dense.begin(), dense.end(), layer) != dense.end();
    if ((layer + 1) % step == 0 && !listed) m.layers[i].mlp = Mlp::moe;
  }
}

void map_deepseek_v3(hf::Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  MlaSpec mla;
  mla.q_lora_rank = c.integer("q_lora_rank", 0, 1);
  mla.kv_lora_rank = c.integer("kv_lora_rank");
  mla.qk_head_dim = c.integer("qk_nope_head_dim");
  mla.qk_pos_emb_head_dim = c.integer("qk_rope_head_dim");
  mla.v_head_dim = c.integer("v_head_dim");
  m.mla = mla;
  m.qk_layernorm = true;  // q_a_layernorm and kv_a_layernorm, fused into the up projections
  m.ffn_hidden_size = c.integer("intermediate_size");
  m.moe.num_experts = c.integer("n_routed_experts");
  m.moe.ffn_hidden_size = c.integer("moe_intermediate_size");
  m.moe.shared_expert_size = m.moe.ffn_hidden_size * c.integer("n_shared_experts", 0, 0);
  const std::int64_t first_dense = c.integer("first_k_dense_replace", 0, 0);
  const std::int64_t freq = c.integer("moe_layer_freq", 1, 1);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto layer = static_cast<std::int64_t>(i);
    if (layer >= first_dense && layer % freq == 0) m.layers[i].mlp = Mlp::moe;
  }
  if (c.integer("num_nextn_predict_layers", 0, 0) > 0) {
    notes.emplace_back("multi-token prediction layers are not included");
  }
}

void map_gpt2(hf::Config& c, ModelSpec& m, Notes&) {
  m.hidden_size = c.integer("n_embd");
  m.layers.assign(static_cast<std::size_t>(c.integer("n_layer")), LayerSpec{});
  m.num_attention_heads = c.integer("n_head");
  m.ffn_hidden_size = c.integer("n_inner", 4 * m.hidden_size, 1);
  m.vocab_size = c.integer("vocab_size");
  m.position_embedding = PositionEmbedding::learned_absolute;
  m.max_position_embeddings = c.integer("n_positions");
  m.normalization = Normalization::layer_norm;
  m.add_bias_linear = true;
  m.untie_embeddings_and_output_weights = !c.boolean("tie_word_embeddings", true);
}

struct Architecture {
  std::string_view name;
  Mapper map;
};

constexpr std::array kArchitectures = {
    Architecture{"LlamaForCausalLM", map_llama},
    Architecture{"MistralForCausalLM", map_llama},
    Architecture{"Qwen2ForCausalLM", map_qwen2},
    Architecture{"Qwen3ForCausalLM", map_qwen3},
    Architecture{"MixtralForCausalLM", map_mixtral},
    Architecture{"Qwen3MoeForCausalLM", map_qwen3_moe},
    Architecture{"DeepseekV3ForCausalLM", map_deepseek_v3},
    Architecture{"GPT2LMHeadModel", map_gpt2},
};

/// Config fields that add params or change their shapes, in some architecture or other.
/// One that is set (not false, 0, null or empty) and that the mapping did not read would
/// silently give the wrong params, so it is an error.
constexpr std::array<std::string_view, 18> kShapeFields = {
    "attention_bias",        "mlp_bias",           "num_nextn_predict_layers",
    "n_shared_experts",      "shared_expert_intermediate_size", "first_k_dense_replace",
    "moe_layer_freq",        "decoder_sparse_step", "mlp_only_layers",
    "q_lora_rank",           "kv_lora_rank",       "num_local_experts",
    "num_experts",           "n_routed_experts",   "moe_intermediate_size",
    "qkv_bias",              "block_configs",      "hybrid_override_pattern",
};

bool is_set(json::Element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return false;
    case simdjson::dom::element_type::BOOL:
      return e.get_bool().value_unsafe();
    case simdjson::dom::element_type::INT64:
      return e.get_int64().value_unsafe() != 0;
    case simdjson::dom::element_type::UINT64:
      return e.get_uint64().value_unsafe() != 0;
    case simdjson::dom::element_type::DOUBLE:
      return e.get_double().value_unsafe() != 0;
    case simdjson::dom::element_type::ARRAY:
      return simdjson::dom::array(e).size() > 0;
    case simdjson::dom::element_type::OBJECT:
      return simdjson::dom::object(e).size() > 0;
    default:
      return true;
  }
}

void reject_unread_shape_fields(hf::Config& c) {
  for (std::string_view key : kShapeFields) {
    if (c.was_read(key)) continue;
    auto value = c.reader().root().at_key(key);
    if (value.error() || !is_set(value.value())) continue;
    c.fail(key, fmt::format("changes the params of a model, and the {} mapping does not read "
                            "it; remove it if the model does not use it",
                            c.architecture()));
    return;
  }
}

/// `architectures[0]`, or an error naming the problem.
std::string read_architecture(json::Reader& reader) {
  const json::Path root;
  const json::Path path = root.field("architectures");
  auto list = reader.root().at_key("architectures");
  if (list.error()) {
    reader.fail(root, "missing required key \"architectures\"");
    return {};
  }
  if (!reader.is_array(list.value(), path)) return {};
  for (json::Element item : simdjson::dom::array(list.value())) {
    return std::string(reader.string(item, path.item(0)));
  }
  reader.fail(path, "expected at least one architecture");
  return {};
}

}  // namespace

std::vector<std::string_view> hf_architectures() {
  std::vector<std::string_view> names;
  for (const Architecture& a : kArchitectures) names.push_back(a.name);
  return names;
}

Result<HfModel> read_hf_config(std::string_view text, std::string_view source) {
  json::Reader reader(source);
  if (!reader.parse(text)) return reader.error();
  if (!reader.is_object(reader.root(), json::Path())) return reader.error();
  HfModel model;
  model.architecture = read_architecture(reader);
  if (reader.failed()) return reader.error();
  const Architecture* known = nullptr;
  for (const Architecture& a : kArchitectures) {
    if (a.name == model.architecture) known = &a;
  }
  if (known == nullptr) {
    const json::Path root;
    reader.fail(root.field("architectures").item(0),
                fmt::format("unknown architecture \"{}\"; known: {}. Any GPT-style model can "
                            "be described with Megatron-LM's model arguments instead: "
                            "paramlayout job --world-size N -o DIR -- --num-layers ... "
                            "--hidden-size ...",
                            model.architecture, fmt::join(hf_architectures(), ", ")));
    return reader.error();
  }
  hf::Config config(reader, known->name);
  known->map(config, model.spec, model.notes);
  if (!reader.failed()) reject_unread_shape_fields(config);
  if (reader.failed()) return reader.error();
  if (std::optional<std::string> problem = model_problem(model.spec)) {
    return Error{fmt::format("{}: {}", source, *problem)};
  }
  return model;
}

}  // namespace paramlayout
