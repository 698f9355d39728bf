#include "paramlayout/rank_memory.hpp"
#include "paramlayout/model_buffers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace paramlayout {
namespace {

/// The persistent terms of a stage: its chunks' bytes per rank, and the model's own buffers.
std::vector<MemoryTerm> persistent_terms(const BytesPerRank& b, MemoryTerm model_buffers) {
  return {{"param_buffers", b.params, Exactness::exact},
          {"grad_buffers", b.grads, Exactness::exact},
          {"optimizer_state", b.optimizer, Exactness::exact},
          std::move(model_buffers)};
}

struct Gpu {
  std::string_view name;
  std::int64_t mib;  ///< nvidia-smi --query-gpu=memory.total
};

constexpr std::array<Gpu, 6> kGpus{{
    {"H100", 81559},
    {"H200", 143771},
    {"B200", 183359},
    {"A100-40", 40960},
    {"A100-80", 81920},
    {"A100", 81920},
}};

std::string schedule_name(const JobSpec& job) {
  if (job.parallel.pp == 1) return "no pipelining";
  if (job.parallel.vpp > 1) return fmt::format("interleaved 1F1B ({} chunks)", job.parallel.vpp);
  return "1F1B";
}

std::string recompute_name(const ActivationOptions& o) {
  if (o.recompute == Recompute::none) return "no recompute";
  if (o.recompute == Recompute::selective) return "selective recompute";
  if (o.method == RecomputeMethod::block) {
    return fmt::format("full recompute of the first {} layer{} of each chunk",
                       o.recompute_num_layers, o.recompute_num_layers == 1 ? "" : "s");
  }
  return fmt::format("full recompute in groups of {} layer{}", o.recompute_num_layers,
                     o.recompute_num_layers == 1 ? "" : "s");
}

}  // namespace

std::string describe_activation_inputs(const JobSpec& job) {
  const ActivationOptions& o = job.activations;
  if (o.seq_length == 0) return "";
  return fmt::format(
      "micro batch {} x sequence {}{}, {} micro-batch{} per step, {}, {}", o.micro_batch_size,
      o.seq_length, o.sequence_parallel ? " (sequence parallel)" : "", microbatches_per_step(job),
      microbatches_per_step(job) == 1 ? "" : "es", schedule_name(job), recompute_name(o));
}

Result<std::vector<RankMemory>> rank_memory(const JobSpec& job, const JobPlan& plan) {
  Result<std::vector<StageActivations>> activations = estimate_activations(job, plan);
  if (!activations) return activations.error();
  std::vector<RankMemory> out;
  for (StageActivations& a : *activations) {
    const std::optional<BytesPerRank> buffers = stage_memory(plan, a.stage);
    if (!buffers) return Error{fmt::format("stage {}: its bytes per rank are too large", a.stage)};
    RankMemory m{
        a.stage, persistent_terms(*buffers, model_buffers(job, plan, a.stage)), std::move(a), 0, 0,
        0};
    const std::optional<std::int64_t> persistent = total_bytes(m.persistent);
    const std::optional<std::int64_t> held = total_bytes(m.activations.terms);
    if (!persistent || !held || *held > std::numeric_limits<std::int64_t>::max() - *persistent) {
      return Error{fmt::format("stage {}: its memory per rank does not fit in 64 bits", m.stage)};
    }
    m.persistent_bytes = *persistent;
    m.activation_bytes = *held;
    m.peak_bytes = *persistent + *held;
    out.push_back(std::move(m));
  }
  return out;
}

std::int64_t heaviest_peak_stage(const std::vector<RankMemory>& stages) {
  std::int64_t heaviest = 0;
  for (std::size_t s = 1; s < stages.size(); ++s) {
    if (stages[s].peak_bytes > stages[static_cast<std::size_t>(heaviest)].peak_bytes) {
      heaviest = static_cast<std::int64_t>(s);
    }
  }
  return heaviest;
}

std::optional<KnownGpu> find_gpu(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const Gpu& g : kGpus) {
    if (upper == g.name) return KnownGpu{g.name, g.mib << 20};
  }
  return std::nullopt;
}

std::string_view known_gpu_names() { return "H100, H200, B200, A100-40, A100-80"; }

}  // namespace paramlayout
