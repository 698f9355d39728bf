// A whole training job: the model, how the world is split, and how DistributedDataParallel
// and the optimizer lay out each model chunk's buffers; planned chunk by chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/activation_options.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/model.hpp"
#include "paramlayout/model_buffer_options.hpp"
#include "paramlayout/model_chunk.hpp"
#include "paramlayout/optimizer_state.hpp"
#include "paramlayout/pipeline.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// Which params Megatron-LM builds as quantized tensors (--fp8-param-gather): the weights of
/// Transformer Engine's linear modules in the layers built under fp8_model_init.
struct QuantizedParams {
  Storage storage = Storage::dense;  ///< dense: none
  /// --first-last-layers-bf16: this many of the first and last decoder layers stay bf16.
  std::int64_t bf16_first_layers = 0;
  std::int64_t bf16_last_layers = 0;
  /// Multi-token prediction layers are quantized too (fp8 only: they are built under
  /// get_fp8_context, multi_token_prediction.py:1927, 1944, so never under fp4).
  bool mtp_layers = true;
};

/// What decides a job's layouts, with Megatron-LM's derived values.
struct JobSpec {
  std::string model_name;  ///< for the manifests' `model`
  ModelSpec model;
  std::int64_t world_size = 1;
  ParallelConfig parallel;               ///< tp, pp, vpp, cp, ep, etp (stage and chunk unused)
  PipelineConfig pipeline;               ///< the layer split
  bool mtp_repeated_layer = false;       ///< --mtp-use-repeated-layer: only mtp.layers.0 is built
  std::int64_t dp = 1;                   ///< world / (tp x pp x cp)
  std::int64_t expert_dp = 1;            ///< world / (etp x ep x pp)
  std::int64_t optimizer_instances = 1;  ///< --num-distributed-optimizer-instances
  DType param_dtype = DType::float32;
  bool grad_reduce_in_fp32 = false;
  Strategy strategy = Strategy::unpadded;
  OptimizerOptions optimizer;     ///< what decides the optimizer state's bytes per element
  QuantizedParams quantized;      ///< fp8 / fp4 param storage
  ActivationOptions activations;  ///< what decides the activation memory estimate
  ModelBufferOptions buffers;     ///< what decides the model's own persistent tensors
  Packer packer = Packer::megatron;
  bool pad_for_high_nccl_busbw = false;
  /// Bucketing: none without --overlap-grad-reduce; else --ddp-bucket-size, or the rank's
  /// params / --ddp-num-buckets, or training's rule (training_bucket_size over dp x cp).
  bool overlap_grad_reduce = false;
  bool overlap_param_gather_with_optimizer_step = false;
  std::optional<std::int64_t> ddp_bucket_size;
  std::optional<std::int64_t> ddp_num_buckets;
  std::vector<std::string> ignored_arguments;  ///< arguments that do not change the layout
  std::vector<std::string> notes;              ///< for people: choices made, defaults taken

  /// Ranks a dense buffer is sharded over: dp x cp / optimizer instances.
  std::int64_t dense_shards() const;
  /// Ranks an expert-parallel buffer is sharded over: expert dp / optimizer instances.
  std::int64_t expert_shards() const;
};

/// One (stage, chunk): its manifest, its layout and their figures.
struct JobChunk {
  ChunkPlacement placement;
  Manifest manifest;  ///< written by write_manifest_json; named stageS.chunkC.manifest.json
  Layout layout;
  LayoutStats stats;  ///< with the job's optimizer state charged
  /// The layout's own figures, as its file records them and `check` derives them: the
  /// optimizer state of Megatron-LM's defaults (stats.hpp optimizer_state).
  LayoutStats layout_stats;
  std::int64_t param_elements = 0;
};

/// Every chunk of a job, stage-major, and which stage needs the most memory per rank.
struct JobPlan {
  std::vector<JobChunk> chunks;
  std::int64_t heaviest_stage = 0;
};

/// The buffers' bucket size for a chunk, as Megatron-LM decides it: only the first chunk
/// of the first pipeline stage is bucketed; `stage_params` is that stage's param count.
std::optional<std::int64_t> job_bucket_size(const JobSpec& job, const ChunkPlacement& chunk,
                                            std::int64_t stage_params);

/// How one chunk of `job` is planned: the job's strategy, packer and dtypes, its buffers
/// sharded over dense_shards() and expert_shards(), bucketed by job_bucket_size. The one way
/// from a job to PlanOptions.
PlanOptions job_plan_options(const JobSpec& job, const ChunkPlacement& chunk,
                             std::int64_t stage_params);

/// `stageS.chunkC`: how a job names a chunk's files (`.manifest.json`, `.layout.json`) and
/// its manifest in messages.
std::string chunk_file_stem(const ChunkPlacement& chunk);

/// Marks the params of `chunk` (placed at `placement`) that Megatron-LM and Transformer
/// Engine build as quantized tensors under `quantized`.
void mark_quantized_params(ModelChunk& chunk, const ChunkPlacement& placement,
                           const QuantizedParams& quantized, std::int64_t num_layers);

/// What a job is planned for: its files (each manifest hashed, as its layout records it), or
/// its figures alone (a search weighs thousands of launches and writes none: no hashes, and
/// the planner's layouts trusted without a structure check).
enum class JobPlanUse { files, figures };

/// Builds every chunk's manifest, then plans each by plan_chunk, as `plan` does, and charges
/// each buffer's optimizer state as the job's optimizer allocates it. Fails when the model
/// cannot be split as asked.
Result<JobPlan> plan_job(const JobSpec& job, JobPlanUse use = JobPlanUse::files);

/// Bytes per rank of one pipeline stage: its chunks' params, grads and optimizer state;
/// nullopt when the stage's total does not fit in 64 bits (plan_job refuses such a job).
std::optional<BytesPerRank> stage_memory(const JobPlan& plan, std::int64_t stage);

/// Which of `stages` (bytes per rank of each pipeline stage, in order) needs the most
/// memory: the first of those with the largest total.
std::int64_t heaviest_stage(const std::vector<BytesPerRank>& stages);

/// `job.json` (paramlayout.job/v1): the job's sizes and, per chunk, what it builds, its files
/// (chunk_file_stem) and its figures.
std::string write_job_json(const JobSpec& job, const JobPlan& plan);

}  // namespace paramlayout
