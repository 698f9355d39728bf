// synth: a Hugging Face `config.json` -> manifest v1 of one rank's model chunk, with
// Megatron-LM's GPT naming (Transformer Engine layer spec) and tensor / pipeline / expert
// parallel slicing. For planning before a model exists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/model_chunk.hpp"

namespace paramlayout {

/// How the model is split, as Megatron-LM's options name it.
struct SynthOptions {
  std::int64_t tp = 1;                    ///< tensor parallel
  std::int64_t pp = 1;                    ///< pipeline parallel
  std::int64_t stage = 0;                 ///< this chunk's pipeline stage, 0-based
  std::int64_t ep = 1;                    ///< expert parallel
  std::int64_t etp = 0;                   ///< expert tensor parallel; 0: same as tp
  std::int64_t vocab_divisible_by = 128;  ///< Megatron pads the vocab to a multiple of this x tp
  DType dtype = DType::bfloat16;
};

/// A synthesized chunk: its params in `named_parameters()` order, and where it came from.
struct SynthModel : ModelChunk {
  std::string architecture;        ///< the config's architecture, e.g. "LlamaForCausalLM"
  std::string model;               ///< the manifest's `model`
  ParallelConfig parallel;         ///< recorded in the manifest
  std::vector<std::string> notes;  ///< where the params differ from the checkpoint's tensors
};

/// Reads a config.json text (`source` names it in errors) and builds the chunk.
Result<SynthModel> synth_model(std::string_view config_text, std::string_view source,
                               const SynthOptions& options);

/// The chunk as manifest v1 JSON text.
std::string synth_manifest_json(const SynthModel& model, DType dtype);

}  // namespace paramlayout
