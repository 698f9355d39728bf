// Planning a whole job: every (stage, chunk) is its own DistributedDataParallel, so its own
// manifest and layout, bucketed as Megatron-LM buckets it.
#include "paramlayout/job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "job/optimizer_charge.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/model_chunk.hpp"
#include "paramlayout/plan_chunk.hpp"

namespace paramlayout {
namespace {

std::string chunk_name(const JobSpec& job, const ChunkPlacement& p) {
  return fmt::format("{}-stage{}-chunk{}", job.model_name, p.stage, p.chunk);
}

/// The launch's arguments a refused tensor or expert split is made of, as the line names them.
std::string split_arguments(const ParallelConfig& p) {
  return fmt::format(
      "--tensor-model-parallel-size {}, --expert-model-parallel-size {}, "
      "--expert-tensor-parallel-size {}",
      p.tp, p.ep, p.etp);
}

/// The launch's arguments a refused pipeline split is made of, as the line names them.
std::string pipeline_arguments(const PipelineConfig& c) {
  std::string out =
      fmt::format("--num-layers {}, --pipeline-model-parallel-size {}", c.num_layers, c.pp);
  if (c.vpp > 1) out += fmt::format(", {} virtual chunks per stage", c.vpp);
  if (c.first_stage_layers) {
    out += fmt::format(", --decoder-first-pipeline-num-layers {}", *c.first_stage_layers);
  }
  if (c.last_stage_layers) {
    out += fmt::format(", --decoder-last-pipeline-num-layers {}", *c.last_stage_layers);
  }
  if (c.account_for_embedding) out += ", --account-for-embedding-in-pipeline-split";
  if (c.account_for_loss) out += ", --account-for-loss-in-pipeline-split";
  return out;
}

}  // namespace

std::string chunk_file_stem(const ChunkPlacement& chunk) {
  return fmt::format("stage{}.chunk{}", chunk.stage, chunk.chunk);
}

std::int64_t JobSpec::dense_shards() const { return dp * parallel.cp / optimizer_instances; }

std::int64_t JobSpec::expert_shards() const { return expert_dp / optimizer_instances; }

std::optional<std::int64_t> job_bucket_size(const JobSpec& job, const ChunkPlacement& chunk,
                                            std::int64_t stage_params) {
  if (!job.overlap_grad_reduce || chunk.stage > 0 || chunk.chunk > 0 ||
      job.overlap_param_gather_with_optimizer_step) {
    return std::nullopt;
  }
  if (job.ddp_num_buckets) return std::max<std::int64_t>(1, stage_params / *job.ddp_num_buckets);
  if (job.ddp_bucket_size) return *job.ddp_bucket_size;
  return training_bucket_size(job.dp * job.parallel.cp);
}

PlanOptions job_plan_options(const JobSpec& job, const ChunkPlacement& chunk,
                             std::int64_t stage_params) {
  PlanOptions options;
  options.strategy = job.strategy;
  options.dp = job.dense_shards();
  options.expert_dp = job.expert_shards();
  options.bucket_size = job_bucket_size(job, chunk, stage_params);
  options.grad_reduce_in_fp32 = job.grad_reduce_in_fp32;
  options.pad_for_high_nccl_busbw = job.pad_for_high_nccl_busbw;
  options.packer = job.packer;
  return options;
}

Result<JobPlan> plan_job(const JobSpec& job, JobPlanUse use) {
  const TensorSplit split{job.parallel.tp, job.parallel.ep, job.parallel.etp};
  if (std::optional<std::string> problem = split_problem(job.model, split)) {
    return Error{
        fmt::format("the model cannot be split ({}): {}", split_arguments(job.parallel), *problem)};
  }
  if (std::optional<std::string> problem = size_problem(job.model, split)) {
    return Error{"the model: " + *problem};
  }
  Result<std::vector<ChunkPlacement>> placements = place_layers(job.pipeline);
  if (!placements && job.pipeline.layout.empty() && job.pipeline.hybrid_stage_layers.empty()) {
    return Error{fmt::format("the layers cannot be split over the pipeline ({}): {}",
                             pipeline_arguments(job.pipeline), placements.error().message)};
  }
  if (!placements) return placements.error();
  if (std::optional<std::string> problem =
          pipeline_problem(job.model, static_cast<std::int64_t>(placements->size()))) {
    return Error{"the model cannot be split: " + *problem};
  }

  JobPlan out;
  std::vector<std::int64_t> stage_params(static_cast<std::size_t>(job.parallel.pp), 0);
  for (ChunkPlacement& placement : *placements) {
    if (job.mtp_repeated_layer && placement.mtp_layers.size() > 1) placement.mtp_layers.resize(1);
    ParallelConfig parallel = job.parallel;
    parallel.stage = placement.stage;
    parallel.chunk = placement.chunk;
    ModelChunk chunk = build_chunk(job.model, split, placement);
    mark_quantized_params(chunk, placement, job.quantized, job.model.num_layers());
    JobChunk& c = out.chunks.emplace_back();
    c.placement = placement;
    c.param_elements = chunk.numel();
    if (c.param_elements == std::numeric_limits<std::int64_t>::max()) {
      return Error{
          fmt::format("stage {} chunk {}: its elements add up to more than 2^63: too "
                      "large",
                      placement.stage, placement.chunk)};
    }
    c.manifest = chunk_manifest(chunk, chunk_name(job, placement), job.param_dtype, &parallel);
    c.manifest.source = chunk_file_stem(placement) + ".manifest.json";
    if (use == JobPlanUse::files) c.manifest.sha256 = sha256_hex(write_manifest_json(c.manifest));
    stage_params[static_cast<std::size_t>(placement.stage)] += c.param_elements;
  }
  // Stages repeat: a chunk whose params match an earlier one's but for their names, under the
  // same options, takes that chunk's plan under its own names.
  // planned_as[i]: the chunk whose plan chunk i takes (i itself when planned on its own).
  std::vector<std::size_t> planned_as;
  for (std::size_t i = 0; i < out.chunks.size(); ++i) {
    JobChunk& c = out.chunks[i];
    const PlanOptions options = job_plan_options(
        job, c.placement, stage_params[static_cast<std::size_t>(c.placement.stage)]);
    std::size_t earlier = 0;
    while (earlier < i &&
           !(planned_as[earlier] == earlier && out.chunks[earlier].layout.options == options &&
             same_but_names(out.chunks[earlier].manifest, c.manifest))) {
      ++earlier;
    }
    planned_as.push_back(earlier);
    ChunkPlan plan;
    if (earlier < i) {
      const JobChunk& p = out.chunks[earlier];
      plan = relabel_plan(ChunkPlan{p.layout, p.layout_stats}, p.manifest, c.manifest);
    } else {
      Result<ChunkPlan> planned =
          plan_chunk(c.manifest, options, nullptr,
                     use == JobPlanUse::files ? LayoutStructure::check : LayoutStructure::trusted);
      if (!planned) return planned.error();
      plan = std::move(*planned);
    }
    c.layout = std::move(plan.layout);
    c.layout_stats = plan.stats;
    c.stats = std::move(plan.stats);
  }
  if (Result<void> charged = charge_optimizer_state(job, out, planned_as); !charged) {
    return charged.error();
  }
  std::vector<BytesPerRank> stages;
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) {
    const std::optional<BytesPerRank> memory = stage_memory(out, stage);
    if (!memory) return Error{fmt::format("stage {}: its bytes per rank are too large", stage)};
    stages.push_back(*memory);
  }
  out.heaviest_stage = heaviest_stage(stages);
  return out;
}

std::int64_t heaviest_stage(const std::vector<BytesPerRank>& stages) {
  std::int64_t heaviest = 0;
  for (std::size_t s = 1; s < stages.size(); ++s) {
    if (stages[s].total() > stages[static_cast<std::size_t>(heaviest)].total()) {
      heaviest = static_cast<std::int64_t>(s);
    }
  }
  return heaviest;
}

std::optional<BytesPerRank> stage_memory(const JobPlan& plan, std::int64_t stage) {
  BytesPerRank m;
  for (const JobChunk& c : plan.chunks) {
    if (c.placement.stage == stage && !m.add(c.stats.bytes_per_rank)) return std::nullopt;
  }
  return m;
}

}  // namespace paramlayout
