// A Hugging Face config.json -> the model description, as Megatron-Bridge maps each
// architecture to Megatron-LM's TransformerConfig.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/model.hpp"

namespace paramlayout {

/// A model read from a config.json.
struct HfModel {
  std::string architecture;  ///< the config's `architectures[0]`
  ModelSpec spec;
  /// Where Megatron-LM's params differ from the checkpoint's tensors (a buffer, a bias one
  /// side has), for people.
  std::vector<std::string> notes;
};

/// One architecture the mapping knows.
struct HfArchitecture {
  std::string_view name;    ///< the config's `architectures[0]`, e.g. "LlamaForCausalLM"
  std::string_view models;  ///< the models it covers, for people
};

/// The architectures the mapping knows, in a stable order.
std::vector<HfArchitecture> hf_architecture_list();

/// Their names (`architectures[0]` values), in the same order.
std::vector<std::string_view> hf_architectures();

/// Reads a config.json text (`source` names it in errors). A field that would change a
/// param's shape and that the architecture's mapping does not understand is an error.
Result<HfModel> read_hf_config(std::string_view text, std::string_view source);

}  // namespace paramlayout
