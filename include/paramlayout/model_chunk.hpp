// One rank's model chunk: the trainable params that Megatron-LM's GPTModel (Transformer
// Engine layer spec) registers for a pipeline stage's virtual chunk, in the order
// named_parameters() yields them, with tensor- and expert-parallel shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/manifest.hpp"
#include "paramlayout/model.hpp"
#include "paramlayout/pipeline.hpp"

namespace paramlayout {

/// How each layer's weights are split across ranks.
struct TensorSplit {
  std::int64_t tp = 1;   ///< tensor parallel
  std::int64_t ep = 1;   ///< expert parallel: each rank holds num_experts / ep experts
  std::int64_t etp = 1;  ///< expert tensor parallel

  /// Whether experts are reduced over their own data-parallel group (their own buffer):
  /// with ep > 1 or etp != tp; otherwise they sit with the dense params.
  bool experts_apart() const { return ep > 1 || etp != tp; }
};

/// Most params one rank's chunks may hold, far above any model's (DeepSeek-V3 unsplit has
/// about 30,000).
inline constexpr std::int64_t kMaxChunkParams = 2'000'000;

/// One param of a chunk.
struct ChunkParam {
  std::string name;
  std::vector<std::int64_t> shape;
  bool expert_parallel = false;
  bool embedding_or_output = false;
  bool shared_embedding = false;
  bool use_muon = true;              ///< false: never managed by Muon (Mamba's in_proj)
  Storage storage = Storage::dense;  ///< quantized (fp8) storage of a TE linear's weight
  /// The product of the shape; INT64_MAX when it does not fit in 64 bits.
  std::int64_t numel() const;
};

/// A chunk's params, in named_parameters() order.
struct ModelChunk {
  std::vector<ChunkParam> params;
  std::int64_t vocab_padding = 0;  ///< elements added by padding the vocab, on this chunk
  /// The params' elements; INT64_MAX when the sum does not fit in 64 bits.
  std::int64_t numel() const;
};

/// The vocab rows Megatron-LM allocates: vocab_size padded to a multiple of
/// make_vocab_size_divisible_by x tp (of make_vocab_size_divisible_by alone where the model's
/// builder pads it so).
std::int64_t padded_vocab_size(const ModelSpec& model, std::int64_t tp);

/// The first split Megatron-LM would refuse for `model` ("tp 3 does not divide the 32
/// attention heads"), naming the sizes.
std::optional<std::string> split_problem(const ModelSpec& model, const TensorSplit& split);

/// Why `model` cannot be built as `chunks` pipeline chunks (stages x virtual chunks), if it
/// cannot (a builder that builds one stage only).
std::optional<std::string> pipeline_problem(const ModelSpec& model, std::int64_t chunks);

/// Why a rank's chunks of `model` would hold more than kMaxChunkParams params, if they would.
std::optional<std::string> size_problem(const ModelSpec& model, const TensorSplit& split);

/// The layers a chunk holds, in order: its decoder layers, then each multi-token prediction
/// layer's (a hybrid model's holds every one of hybrid_mtp_layers).
std::vector<LayerSpec> chunk_layers(const ModelSpec& model, const ChunkPlacement& placement);

/// The params of one chunk. Tied embedding and output weights on different stages are
/// separate copies marked `shared_embedding`, as are the embedding copies that
/// multi-token prediction layers need. The model and split must be valid (model_problem,
/// split_problem).
ModelChunk build_chunk(const ModelSpec& model, const TensorSplit& split,
                       const ChunkPlacement& placement);

/// A chunk as a manifest, every param of `dtype`: `model` names it, `parallel` (when given)
/// records the split it was made for. Its sha256 and source are left empty for the caller
/// (plan_job hashes the text write_manifest_json gives it, as if it had been read from it). The
/// chunk's elements must fit in 64 bits (ModelChunk::numel).
Manifest chunk_manifest(const ModelChunk& chunk, std::string_view model, DType dtype,
                        const ParallelConfig* parallel);

}  // namespace paramlayout
