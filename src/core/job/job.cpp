// Planning a whole job: every (stage, chunk) is its own DistributedDataParallel, so its own
// manifest and layout, bucketed as Megatron-LM buckets it.
#include "paramlayout/job.hpp"

#include <fmt/format.h>

#include <limits>

#include "paramlayout/model_chunk.hpp"
#include "paramlayout/plan.hpp"

namespace paramlayout {
namespace {

std::string chunk_name(const JobSpec& job, const ChunkPlacement& p) {
  return fmt::format("{}-stage{}-chunk{}", job.model_name, p.stage, p.chunk);
}

std::string manifest_source(const ChunkPlacement& p) {
  return fmt::format("stage{}.chunk{}.manifest.json", p.stage, p.chunk);
}

/// Charges each buffer's optimizer state at what `optimizer` allocates per owned element
/// (the whole buffer without sharding, its shard with it); false when a figure does not fit.
bool charge_optimizer_state(const Layout& layout, const OptimizerOptions& optimizer,
                            LayoutStats& stats) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    const BufferLayout& b = layout.buffers[i];
    const std::int64_t owned =
        b.strategy == Strategy::unpadded ? b.numel : b.numel / b.num_shards.value_or(1);
    const OptimizerStateBytes per_element = optimizer_state_bytes(
        optimizer, b.key.param_dtype, b.key.grad_dtype, b.key.layerwise);
    const std::optional<std::int64_t> bytes = checked_mul(owned, per_element.total());
    const std::optional<std::int64_t> sum = bytes ? checked_add(total, *bytes) : std::nullopt;
    if (!sum) return false;
    stats.buffers[i].optimizer_bytes_per_rank = *bytes;
    total = *sum;
  }
  stats.optimizer_bytes = total;
  return checked_add(stats.param_bytes + stats.grad_bytes, total).has_value();
}

}  // namespace

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
  return std::max<std::int64_t>(40'000'000, 1'000'000 * job.dp * job.parallel.cp);
}

Result<JobPlan> plan_job(const JobSpec& job) {
  const TensorSplit split{job.parallel.tp, job.parallel.ep, job.parallel.etp};
  if (std::optional<std::string> problem = split_problem(job.model, split)) {
    return Error{"the model cannot be split: " + *problem};
  }
  if (std::optional<std::string> problem = size_problem(job.model, split)) {
    return Error{"the model: " + *problem};
  }
  Result<std::vector<ChunkPlacement>> placements = place_layers(job.pipeline);
  if (!placements) return placements.error();

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
    c.manifest_json =
        chunk_manifest_json(chunk, chunk_name(job, placement), job.param_dtype, &parallel);
    c.param_elements = chunk.numel();
    if (c.param_elements == std::numeric_limits<std::int64_t>::max()) {
      return Error{fmt::format("stage {} chunk {}: its elements add up to more than 2^63: too "
                               "large",
                               placement.stage, placement.chunk)};
    }
    stage_params[static_cast<std::size_t>(placement.stage)] += c.param_elements;
  }
  for (JobChunk& c : out.chunks) {
    Result<Manifest> manifest = parse_manifest(c.manifest_json, manifest_source(c.placement));
    if (!manifest) return manifest.error();
    PlanOptions options;
    options.strategy = job.strategy;
    options.dp = job.dense_shards();
    options.expert_dp = job.expert_shards();
    options.bucket_size = job_bucket_size(
        job, c.placement, stage_params[static_cast<std::size_t>(c.placement.stage)]);
    options.grad_reduce_in_fp32 = job.grad_reduce_in_fp32;
    options.pad_for_high_nccl_busbw = job.pad_for_high_nccl_busbw;
    options.packer = job.packer;
    Result<Layout> layout = plan(*manifest, options);
    if (!layout) return layout.error();
    Result<LayoutStats> stats = layout_stats(*layout, *manifest);
    if (!stats) return stats.error();
    if (!charge_optimizer_state(*layout, job.optimizer, *stats)) {
      return Error{fmt::format("stage {} chunk {}: its optimizer state per rank is too large",
                               c.placement.stage, c.placement.chunk)};
    }
    c.stats = std::move(*stats);
    c.manifest = std::move(*manifest);
    c.layout = std::move(*layout);
  }
  std::int64_t heaviest = -1;
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) {
    const std::optional<StageMemory> memory = stage_memory(out, stage);
    if (!memory) return Error{fmt::format("stage {}: its bytes per rank are too large", stage)};
    if (memory->total() > heaviest) {
      heaviest = memory->total();
      out.heaviest_stage = stage;
    }
  }
  return out;
}

std::optional<StageMemory> stage_memory(const JobPlan& plan, std::int64_t stage) {
  StageMemory m;
  std::optional<std::int64_t> total = 0;
  for (const JobChunk& c : plan.chunks) {
    if (c.placement.stage != stage) continue;
    m.params += c.stats.param_bytes;
    m.grads += c.stats.grad_bytes;
    m.optimizer += c.stats.optimizer_bytes;
    // Each chunk's total fits (layout_stats checks it); so do these sums while theirs does.
    total = checked_add(*total, c.stats.param_bytes + c.stats.grad_bytes + c.stats.optimizer_bytes);
    if (!total) return std::nullopt;
  }
  return m;
}

}  // namespace paramlayout
