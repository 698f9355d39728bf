// The model half of Megatron-LM's arguments: the description they give without a Hugging
// Face config, or their agreement with the one a config gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arg_map.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/model.hpp"

namespace paramlayout::job {

/// The model that Megatron-LM's model arguments describe (GPTModel, or HybridModel with a
/// hybrid layer pattern), with its defaults. `hybrid_stages`: the layers of each
/// '|'-separated stage of a hybrid pattern (empty without pipes).
/// Tokenizer files are read through `files`; `notes` gets where the vocabulary came from.
ModelSpec read_model_args(ArgMap& args, std::vector<std::int64_t>& hybrid_stages,
                          const FileReader& files, std::vector<std::string>& notes);

/// Checks that the model arguments `args` gives agree with `model` (from a config.json).
void check_model_args_agree(ArgMap& args, const ModelSpec& model);

/// The arguments that build the model the same whatever describes it: vocab padding,
/// multi-token prediction layers, grouped expert GEMMs, attention sinks.
void read_build_args(ArgMap& args, ModelSpec& model, std::vector<std::string>& notes);

/// --position-embedding-type as Megatron-LM settles it: rope with
/// --use-rotary-position-embeddings (arguments.py:1626-1627), none with --no-position-embedding
/// unless rope.
std::string position_embedding_type(ArgMap& args);

/// A `--moe-layer-freq` or `--linear-attention-freq` list as Megatron-LM evaluates it:
/// "[1,0,1]", "([0]*3+[1]*58)". Empty with `error` set when it is not such a list.
std::vector<std::int64_t> parse_layer_list(const std::string& text, std::string& error);

}  // namespace paramlayout::job
