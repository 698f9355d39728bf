// A config.json -> the model description: the table of architectures, each a small mapping
// (hf/*.cpp) as Megatron-Bridge's bridges set Megatron-LM's TransformerConfig, and a guard
// that refuses a field which would change the params and that the mapping did not read.
#include "paramlayout/hf_config.hpp"

#include <fmt/format.h>

#include <array>

#include "hf/mappers.hpp"
#include "hf_reader.hpp"

namespace paramlayout {
namespace {

struct Architecture {
  std::string_view name;
  std::string_view models;
  hf::Mapper map;
  /// Multimodal configs: the key of the language model's config ("text_config"); the vision or
  /// audio tower is left out.
  std::string_view scope = {};
  /// Architectures Megatron-Bridge maps with a part Megatron-LM cannot build: that part.
  std::string_view refused = {};
  /// Multimodal configs whose bridge reads `tie_word_embeddings` from the language model's
  /// config, not the top level.
  bool tie_in_scope = false;
};

/// Megatron-Bridge's text decoders, and GPT-2, which Megatron-LM builds as its own GPT.
constexpr std::array kArchitectures = {
    Architecture{"LlamaForCausalLM", "Llama 2, 3, 3.1, 3.2; Granite (biased Llama)", hf::map_llama},
    Architecture{"DeciLMForCausalLM", "Llama-Nemotron Super, Ultra (heterogeneous blocks)",
                 hf::map_decilm},
    Architecture{"MistralForCausalLM", "Mistral, Mistral-Nemo, Ministral", hf::map_llama},
    Architecture{"MixtralForCausalLM", "Mixtral", hf::map_mixtral},
    Architecture{"GemmaForCausalLM", "Gemma", hf::map_gemma},
    Architecture{"Gemma2ForCausalLM", "Gemma 2", hf::map_gemma2},
    Architecture{"Gemma3ForCausalLM", "Gemma 3 (text)", hf::map_gemma3},
    Architecture{"Qwen2ForCausalLM", "Qwen2, Qwen2.5", hf::map_qwen2},
    Architecture{"Qwen2MoeForCausalLM", "Qwen1.5-MoE, Qwen2-MoE", hf::map_qwen2_moe},
    Architecture{"Qwen3ForCausalLM", "Qwen3", hf::map_qwen3},
    Architecture{"Qwen3MoeForCausalLM", "Qwen3-MoE", hf::map_qwen3_moe},
    Architecture{"Qwen3NextForCausalLM", "Qwen3-Next (gated delta net and attention)",
                 hf::map_qwen3_next},
    Architecture{"DeepseekV2ForCausalLM", "DeepSeek-V2, DeepSeek-V2-Lite", hf::map_deepseek},
    Architecture{"DeepseekV3ForCausalLM", "DeepSeek-V3, Kimi-K2", hf::map_deepseek},
    Architecture{"Glm4MoeForCausalLM", "GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7", hf::map_glm4_moe},
    Architecture{"GptOssForCausalLM", "gpt-oss", hf::map_gpt_oss},
    Architecture{"OlmoeForCausalLM", "OLMoE", hf::map_olmoe},
    Architecture{"Phi3ForCausalLM", "Phi-3, Phi-3.5, Phi-4", hf::map_phi3},
    Architecture{"NemotronHForCausalLM", "Nemotron-H (hybrid Mamba)", hf::map_nemotron_h},
    Architecture{"GPT2LMHeadModel", "GPT-2, GPT-3-style", hf::map_gpt2},
    Architecture{"Qwen3_5ForCausalLM", "Qwen3.5 (gated delta net and attention)", hf::map_qwen3_5},
    Architecture{"Qwen3_5MoeForCausalLM", "Qwen3.5-MoE (gated delta net and attention)",
                 hf::map_qwen3_next},
    Architecture{"Glm4MoeLiteForCausalLM", "GLM-4.7-Flash (multi-latent attention)",
                 hf::map_glm4_moe_lite},
    Architecture{"KimiK2ForCausalLM", "Kimi-K2", hf::map_deepseek},
    Architecture{"GlmMoeDsaForCausalLM", "GLM-5 (DeepSeek sparse attention)", hf::map_glm_moe_dsa},
    Architecture{"MiniMaxM2ForCausalLM", "MiniMax-M2, M2.1, M2.5", hf::map_minimax_m2},
    Architecture{"NemotronForCausalLM", "Nemotron-4, Minitron", hf::map_nemotron},
    Architecture{"Ernie4_5_MoeForCausalLM", "ERNIE 4.5 MoE", hf::map_ernie4_5_moe},
    Architecture{"Exaone4ForCausalLM", "EXAONE 4.0", hf::map_exaone4},
    Architecture{"MiMoForCausalLM", "MiMo (Qwen2 with multi-token prediction)", hf::map_mimo},
    Architecture{"ExaoneMoEForCausalLM", "K-EXAONE (EXAONE-MoE)", hf::map_exaone_moe},
    Architecture{"ExaoneMoeForCausalLM", "K-EXAONE (EXAONE-MoE; transformers' spelling)",
                 hf::map_exaone_moe},
    Architecture{"SarvamMoEForCausalLM", "Sarvam-30B", hf::map_sarvam_moe},
    Architecture{"SarvamMLAForCausalLM", "Sarvam-105B (multi-latent attention)",
                 hf::map_sarvam_mla},
    Architecture{"BailingMoeV2ForCausalLM", "Ling 2.0 (mini, flash, 1T)", hf::map_bailing_moe_v2},
    Architecture{"HYV3ForCausalLM", "Hunyuan 3", hf::map_hy_v3},
    Architecture{"MiMoV2FlashForCausalLM", "MiMo-V2-Flash (sliding-window and full layers)",
                 hf::map_mimo_v2_flash},
    Architecture{"Step3p5ForCausalLM", "Step-3.5-Flash (sliding and full attention layers)",
                 hf::map_step3p5},
    Architecture{"FalconH1ForCausalLM", "Falcon-H1 (Mamba-2 and attention side by side)",
                 hf::map_falcon_h1},
    Architecture{"Gemma4ForCausalLM", "Gemma 4 (dense with per-layer inputs, or MoE)",
                 hf::map_gemma4},
    Architecture{"DeepseekV4ForCausalLM",
                 "DeepSeek-V4 (refused: Megatron-LM lacks its attention)",
                 nullptr,
                 {},
                 "attention variant \"dsv4_hybrid\" (compressed sparse attention with "
                 "hyper-connections), which Megatron-Bridge's deepseek_v4 bridge sets and "
                 "Megatron-LM at d98e8a64 does not have"},
    // Multimodal models whose language model is one of the above.
    Architecture{"Qwen3_5ForConditionalGeneration", "Qwen3.5 (language model only)",
                 hf::map_qwen3_5, "text_config"},
    Architecture{"Qwen3_5MoeForConditionalGeneration", "Qwen3.5-MoE (language model only)",
                 hf::map_qwen3_next, "text_config"},
    Architecture{"Qwen3VLForConditionalGeneration", "Qwen3-VL (language model only)", hf::map_qwen3,
                 "text_config"},
    Architecture{"Qwen3VLMoeForConditionalGeneration", "Qwen3-VL-MoE (language model only)",
                 hf::map_qwen3_moe, "text_config"},
    Architecture{"Gemma3ForConditionalGeneration", "Gemma 3 (language model only)", hf::map_gemma3,
                 "text_config"},
    Architecture{"Mistral3ForConditionalGeneration",
                 "Ministral 3 (language model only)",
                 hf::map_ministral3,
                 "text_config",
                 {},
                 true},
    Architecture{"Gemma4ForConditionalGeneration",
                 "Gemma 4 (language model only)",
                 hf::map_gemma4,
                 "text_config",
                 {},
                 true},
};

/// Set to something other than false, 0, null or empty.
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

/// `layer_types` naming a layer other than (sliding-window) attention, whose params are the
/// same as full attention's.
bool has_other_layer_types(json::Element e) {
  if (!e.is_array()) return is_set(e);
  for (json::Element item : simdjson::dom::array(e)) {
    std::string_view type;
    if (item.get(type) != simdjson::SUCCESS) return true;
    if (type != "full_attention" && type != "sliding_attention" && type != "chunked_attention") {
      return true;
    }
  }
  return false;
}

/// A config field that adds params or changes their shapes in some architecture. One that
/// `matters` and that the mapping did not read would silently give the wrong params, so it
/// is an error; fields that change no param (rope, windows, dropouts, ...) are not listed.
struct ShapeField {
  std::string_view name;
  bool (*matters)(json::Element) = is_set;
};

constexpr std::array kShapeFields = {
    // Sizes and attention.
    ShapeField{"intermediate_size"},
    ShapeField{"n_inner"},
    ShapeField{"head_dim"},
    ShapeField{"attention_head_dim"},
    ShapeField{"num_key_value_heads"},
    ShapeField{"tie_word_embeddings"},
    ShapeField{"use_qk_norm"},
    ShapeField{"layer_types", has_other_layer_types},
    ShapeField{"add_cross_attention"},
    // Biases.
    ShapeField{"attention_bias"},
    ShapeField{"mlp_bias"},
    ShapeField{"use_bias"},
    ShapeField{"qkv_bias"},
    ShapeField{"lm_head_bias"},
    // Experts.
    ShapeField{"num_experts"},
    ShapeField{"num_local_experts"},
    ShapeField{"n_routed_experts"},
    ShapeField{"moe_intermediate_size"},
    ShapeField{"n_shared_experts"},
    ShapeField{"shared_expert_intermediate_size"},
    ShapeField{"moe_shared_expert_intermediate_size"},
    ShapeField{"shared_intermediate_size"},
    ShapeField{"moe_latent_size"},
    ShapeField{"first_k_dense_replace"},
    ShapeField{"moe_layer_freq"},
    ShapeField{"decoder_sparse_step"},
    ShapeField{"mlp_only_layers"},
    ShapeField{"mlp_layer_types"},
    ShapeField{"is_moe_layer"},
    ShapeField{"moe_num_experts"},
    ShapeField{"moe_num_shared_experts"},
    ShapeField{"moe_layer_start_index"},
    ShapeField{"num_shared_experts"},
    ShapeField{"mtp_layer_types"},
    ShapeField{"index_n_heads"},
    ShapeField{"index_head_dim"},
    ShapeField{"indexer_types"},
    ShapeField{"swa_num_key_value_heads"},
    ShapeField{"hybrid_layer_pattern"},
    ShapeField{"swa_head_dim"},
    ShapeField{"swa_v_head_dim"},
    // Multi-latent attention.
    ShapeField{"q_lora_rank"},
    ShapeField{"kv_lora_rank"},
    ShapeField{"qk_nope_head_dim"},
    ShapeField{"qk_rope_head_dim"},
    ShapeField{"v_head_dim"},
    // Multi-token prediction.
    ShapeField{"num_nextn_predict_layers"},
    ShapeField{"mtp_num_hidden_layers"},
    ShapeField{"mtp_hybrid_override_pattern"},
    // Heterogeneous, hybrid and linear-attention layers.
    ShapeField{"block_configs"},
    ShapeField{"hybrid_override_pattern"},
    ShapeField{"mamba_num_heads"},
    ShapeField{"mamba_head_dim"},
    ShapeField{"n_groups"},
    ShapeField{"ssm_state_size"},
    ShapeField{"full_attention_interval"},
    ShapeField{"linear_num_key_heads"},
    ShapeField{"linear_num_value_heads"},
    ShapeField{"linear_key_head_dim"},
    ShapeField{"linear_value_head_dim"},
    ShapeField{"linear_conv_kernel_dim"},
    // Step-3.5's names.
    ShapeField{"num_attention_groups"},
    ShapeField{"attention_other_setting"},
    ShapeField{"moe_layers_enum"},
    ShapeField{"share_expert_dim"},
    ShapeField{"share_expert_dims"},
    ShapeField{"use_head_wise_attn_gate"},
    // Falcon-H1's names.
    ShapeField{"mamba_n_heads"},
    ShapeField{"mamba_d_head"},
    ShapeField{"mamba_n_groups"},
    ShapeField{"mamba_d_state"},
    ShapeField{"mamba_d_conv"},
    ShapeField{"mamba_d_ssm"},
    ShapeField{"mamba_proj_bias"},
    ShapeField{"mamba_rms_norm"},
    ShapeField{"projectors_bias"},
    // Gemma 4's names.
    ShapeField{"global_head_dim"},
    ShapeField{"num_global_key_value_heads"},
    ShapeField{"attention_k_eq_v"},
    ShapeField{"num_kv_shared_layers"},
    ShapeField{"use_double_wide_mlp"},
    ShapeField{"hidden_size_per_layer_input"},
    ShapeField{"vocab_size_per_layer_input"},
    ShapeField{"enable_moe_block"},
};

void reject_unread_shape_fields(hf::Config& c) {
  for (const ShapeField& field : kShapeFields) {
    if (c.was_read(field.name)) continue;
    auto value = c.object().at_key(field.name);
    if (value.error() || !field.matters(value.value())) continue;
    c.fail(field.name, fmt::format("changes the params of a model, and the {} mapping does "
                                   "not read it; remove it if the model does not use it",
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

std::vector<HfArchitecture> hf_architecture_list() {
  std::vector<HfArchitecture> list;
  for (const Architecture& a : kArchitectures) list.push_back({a.name, a.models});
  return list;
}

std::vector<std::string_view> hf_architectures() {
  std::vector<std::string_view> names;
  for (const Architecture& a : kArchitectures) names.push_back(a.name);
  return names;
}

namespace {

/// `text` with Python's words for non-finite floats outside strings (`Infinity`,
/// `-Infinity`, which transformers' json.dumps writes, as in Falcon-H1's time_step_limit)
/// read as null, padded to the same length so that errors keep their columns. JSON has no
/// word for them.
std::string with_infinities_as_null(std::string_view text) {
  std::string out(text);
  bool in_string = false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char ch = out[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      continue;
    }
    for (const std::string_view word :
         {std::string_view("-Infinity"), std::string_view("Infinity")}) {
      if (std::string_view(out).substr(i, word.size()) == word) {
        out.replace(i, word.size(), std::string("null") + std::string(word.size() - 4, ' '));
        i += word.size() - 1;
        break;
      }
    }
  }
  return out;
}

}  // namespace

Result<HfModel> read_hf_config(std::string_view text, std::string_view source) {
  json::Reader reader(source);
  const std::string readable = with_infinities_as_null(text);
  if (!reader.parse(readable)) return reader.error();
  if (!reader.is_object(reader.root(), json::Path())) return reader.error();
  HfModel model;
  model.architecture = read_architecture(reader);
  if (reader.failed()) return reader.error();
  const Architecture* known = nullptr;
  for (const Architecture& a : kArchitectures) {
    if (a.name == model.architecture) known = &a;
  }
  if (known == nullptr) {
    // The first few names: the message stays one readable line; --list prints them all.
    const std::vector<std::string_view> names = hf_architectures();
    const std::vector<std::string_view> known_first(names.begin(), names.begin() + 8);
    const json::Path root;
    reader.fail(
        root.field("architectures").item(0),
        fmt::format("unknown architecture \"{}\"; known: {}, ... ({} in all: paramlayout "
                    "synth --list). Any GPT-style model can be described with "
                    "Megatron-LM's model arguments instead: paramlayout job "
                    "--world-size N -o DIR -- --num-layers ... --hidden-size ...",
                    excerpt(model.architecture), fmt::join(known_first, ", "), names.size()));
    return reader.error();
  }
  if (!known->refused.empty()) {
    const json::Path root;
    reader.fail(root.field("architectures").item(0),
                fmt::format("{} needs Megatron-LM's {}", known->name, known->refused));
    return reader.error();
  }
  hf::Config config(reader, known->name, known->scope, known->tie_in_scope);
  if (!known->scope.empty()) {
    model.notes.push_back(fmt::format(
        "the language model only (under {}): the vision or audio tower is left out", known->scope));
  }
  if (!reader.failed()) known->map(config, model.spec, model.notes);
  if (!reader.failed() && model.spec.moe.num_experts > 0) {
    // The bridges' moe_router_topk (Megatron-Bridge's providers read it from here).
    for (std::string_view key : {"num_experts_per_tok", "moe_topk", "num_experts_per_token"}) {
      if (config.has(key)) {
        model.spec.moe.router_topk = config.integer(key, 0, 1);
        break;
      }
    }
  }
  if (!reader.failed()) reject_unread_shape_fields(config);
  if (reader.failed()) return reader.error();
  if (std::optional<std::string> problem = model_problem(model.spec)) {
    return Error{fmt::format("{}: {}", source, *problem)};
  }
  return model;
}

}  // namespace paramlayout
