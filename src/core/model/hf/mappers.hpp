// One small function per Hugging Face architecture family: it reads a config.json's fields
// into the model description as Megatron-Bridge's bridge for that architecture sets
// Megatron-LM's TransformerConfig, and notes where Megatron-LM's model differs from the
// Hugging Face one. Fields an absent key leaves to the Hugging Face config class take that
// class's default, as the bridges read the config object after its defaults.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "../hf_reader.hpp"
#include "paramlayout/model.hpp"

namespace paramlayout::hf {

/// What the description leaves out or represents differently from the checkpoint, for people.
using Notes = std::vector<std::string>;
using Mapper = void (*)(Config&, ModelSpec&, Notes&);

// Shared readers (common.cpp).

/// The fields most decoders share, under Llama's names: layers, hidden size, heads, key/value
/// heads, head_dim, vocab, tied embeddings (`tie_default` when absent) and multi-token
/// prediction layers; RMSNorm, a gated linear unit, rotary positions, no biases and grouped
/// experts, as the bridges set them.
void read_llama_like(Config& c, ModelSpec& m, bool tie_default = false);
/// Multi-latent attention (DeepSeek's fields) with its up-projection norms. An absent
/// q_lora_rank takes the config classes' 1536; null means no query compression.
void read_mla(Config& c, ModelSpec& m);
/// Notes the norm Megatron-LM fuses into linear_q_proj where MLA compresses no queries.
void note_q_proj_norm(const ModelSpec& m, Notes& notes);
/// `attention_bias` -> add_qkv_bias and `mlp_bias` -> add_bias_linear (Megatron-Bridge's
/// mapping), noting what Hugging Face biases that Megatron-LM does not, and the reverse.
void read_biases(Config& c, ModelSpec& m, Notes& notes);
/// Layers `first_k_dense_replace` and on, every `moe_layer_freq`-th, are MoE (DeepSeek, GLM).
void read_first_dense_moe_layers(Config& c, ModelSpec& m, std::int64_t first_dense_default = 0);
/// As read_first_dense_moe_layers, or where only `mlp_layer_types` is given, the layers it
/// calls "sparse"; both given must agree.
void read_dense_or_moe_layers(Config& c, ModelSpec& m, std::int64_t first_dense_default);
/// The first of `keys` the file gives (names differ between a publisher's config and
/// transformers' class, and transformers 5 writes both: num_experts / n_routed_experts), or
/// else the first with a class default; required. All the file gives must agree.
std::int64_t integer_of(Config& c, std::initializer_list<std::string_view> keys);
/// Every `decoder_sparse_step`-th layer not in `mlp_only_layers` is MoE (Qwen MoE models).
void read_sparse_step_moe_layers(Config& c, ModelSpec& m);
/// `num_nextn_predict_layers` (or `mtp_num_hidden_layers`) -> mtp_num_layers; 0 means none.
void read_mtp_layers(Config& c, ModelSpec& m);
/// Notes that the router's expert bias (`e_score_correction_bias`, or the checkpoint's `name`
/// for it) is a buffer in Megatron-LM, so its elements are in the checkpoint but not among the
/// params; marks the model's routers as keeping it (Megatron-Bridge's providers enable it).
void note_expert_bias(ModelSpec& m, Notes& notes,
                      std::string_view name = "e_score_correction_bias");

// The architectures.
void map_llama(Config&, ModelSpec&, Notes&);           // llama.cpp
void map_decilm(Config&, ModelSpec&, Notes&);          // decilm.cpp
void map_mixtral(Config&, ModelSpec&, Notes&);         // llama.cpp
void map_ministral3(Config&, ModelSpec&, Notes&);      // llama.cpp
void map_phi3(Config&, ModelSpec&, Notes&);            // llama.cpp
void map_gemma(Config&, ModelSpec&, Notes&);           // gemma.cpp
void map_gemma2(Config&, ModelSpec&, Notes&);          // gemma.cpp
void map_gemma3(Config&, ModelSpec&, Notes&);          // gemma.cpp
void map_qwen2(Config&, ModelSpec&, Notes&);           // qwen.cpp
void map_qwen2_moe(Config&, ModelSpec&, Notes&);       // qwen.cpp
void map_qwen3(Config&, ModelSpec&, Notes&);           // qwen.cpp
void map_qwen3_moe(Config&, ModelSpec&, Notes&);       // qwen.cpp
void map_qwen3_next(Config&, ModelSpec&, Notes&);      // qwen.cpp
void map_qwen3_5(Config&, ModelSpec&, Notes&);         // qwen.cpp
void map_mimo(Config&, ModelSpec&, Notes&);            // qwen.cpp
void map_deepseek(Config&, ModelSpec&, Notes&);        // moe.cpp
void map_glm4_moe(Config&, ModelSpec&, Notes&);        // moe.cpp
void map_glm4_moe_lite(Config&, ModelSpec&, Notes&);   // moe.cpp
void map_glm_moe_dsa(Config&, ModelSpec&, Notes&);     // moe.cpp
void map_olmoe(Config&, ModelSpec&, Notes&);           // moe.cpp
void map_gpt_oss(Config&, ModelSpec&, Notes&);         // moe.cpp
void map_nemotron_h(Config&, ModelSpec&, Notes&);      // nemotron_h.cpp
void map_gpt2(Config&, ModelSpec&, Notes&);            // gpt2.cpp
void map_nemotron(Config&, ModelSpec&, Notes&);        // nemotron.cpp
void map_exaone4(Config&, ModelSpec&, Notes&);         // exaone.cpp
void map_exaone_moe(Config&, ModelSpec&, Notes&);      // exaone.cpp
void map_minimax_m2(Config&, ModelSpec&, Notes&);      // minimax.cpp
void map_ernie4_5_moe(Config&, ModelSpec&, Notes&);    // ernie.cpp
void map_sarvam_moe(Config&, ModelSpec&, Notes&);      // sarvam.cpp
void map_sarvam_mla(Config&, ModelSpec&, Notes&);      // sarvam.cpp
void map_bailing_moe_v2(Config&, ModelSpec&, Notes&);  // ling_hy.cpp
void map_hy_v3(Config&, ModelSpec&, Notes&);           // ling_hy.cpp
void map_mimo_v2_flash(Config&, ModelSpec&, Notes&);   // mimo_v2.cpp
void map_step3p5(Config&, ModelSpec&, Notes&);         // step.cpp
void map_falcon_h1(Config&, ModelSpec&, Notes&);       // falcon_h1.cpp
void map_gemma4(Config&, ModelSpec&, Notes&);          // gemma4.cpp

}  // namespace paramlayout::hf
