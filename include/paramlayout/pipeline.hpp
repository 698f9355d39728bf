// The pipeline split: which decoder and multi-token prediction layers each (pipeline
// stage, virtual chunk) builds, and which chunks hold the embedding, the final norm and the
// output layer, as Megatron-LM's get_num_layers_to_build, get_transformer_layer_offset,
// PipelineParallelLayerLayout and the MTP placement functions compute them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"

namespace paramlayout {

/// Megatron-LM's pipeline arguments.
struct PipelineConfig {
  std::int64_t num_layers = 1;
  std::int64_t pp = 1;   ///< pipeline stages
  std::int64_t vpp = 1;  ///< virtual chunks per stage (1: no interleaving)
  std::optional<std::int64_t> first_stage_layers;  ///< --decoder-first-pipeline-num-layers
  std::optional<std::int64_t> last_stage_layers;   ///< --decoder-last-pipeline-num-layers
  bool account_for_embedding = false;              ///< --account-for-embedding-in-pipeline-split
  bool account_for_loss = false;                   ///< --account-for-loss-in-pipeline-split
  /// --pipeline-model-parallel-layout, e.g. "Et*3|(tt|)*29m|L" (sets vpp); "" for none.
  std::string layout;
  std::int64_t mtp_num_layers = 0;
  /// --mtp-num-layers was given, even as 0: the decoder's final norm then goes with the last
  /// decoder layer rather than with the output layer.
  bool mtp_given = false;
  /// A hybrid (Mamba) layer pattern's stages, split at '|' (sets vpp); empty for none.
  std::vector<std::int64_t> hybrid_stage_layers;
};

/// What one (pipeline stage, virtual chunk) builds.
struct ChunkPlacement {
  std::int64_t stage = 0;
  std::int64_t chunk = 0;
  std::vector<std::int64_t> layers;      ///< global 0-based decoder layer indices
  std::vector<std::int64_t> mtp_layers;  ///< 0-based multi-token prediction layer indices
  bool pre_process = false;              ///< the first chunk of the first stage: the embedding
  bool post_process = false;             ///< the last chunk of the last stage: the output layer
  bool final_norm = false;               ///< the decoder's final norm
  bool pipeline_parallel = false;        ///< pp > 1: tied weights live on several stages
  /// Decoder layers before this chunk (Megatron-LM's get_transformer_layer_offset).
  std::int64_t layer_offset = 0;

  bool operator==(const ChunkPlacement&) const = default;
};

/// The unrolled stages of a layout string: "(tt|)*2L" -> {"tt", "tt", "L"}. Errors name
/// the character or group that is not understood.
Result<std::vector<std::string>> parse_pipeline_layout(const std::string& layout);

/// A layout string for `stages` (each a run of 'E', 't', 'm', 'L'), with runs of one layer
/// as "t*n" and runs of equal stages as "(...|)*n": {"Ett", "tt", "tt", "tmL"} ->
/// "Et*2|(t*2|)*2,tmL". parse_pipeline_layout reads it back as `stages`.
std::string format_pipeline_layout(const std::vector<std::string>& stages);

/// Every chunk, stage-major (stage 0's chunks first), or the reason Megatron-LM refuses the
/// split.
Result<std::vector<ChunkPlacement>> place_layers(const PipelineConfig& config);

}  // namespace paramlayout
