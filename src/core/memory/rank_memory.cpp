#include "paramlayout/rank_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace paramlayout {
namespace {

/// The persistent terms of a stage's bytes per rank, from its chunks' layouts.
std::vector<MemoryTerm> persistent_terms(const BytesPerRank& b) {
  return {
      {"param_buffers", "DDP's param buffers (padding included)", b.params, Exactness::exact,
       "param_and_grad_buffer.py: _ParamAndGradBuffer"},
      {"grad_buffers", "DDP's grad buffers (padding included)", b.grads, Exactness::exact,
       "param_and_grad_buffer.py: _ParamAndGradBuffer"},
      {"optimizer_state", "the optimizer's main params and state, this rank's shard",
       b.optimizer, Exactness::exact, "optimizer/distrib_optimizer.py, optimizer/optimizer.py"},
  };
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

}  // namespace

Result<std::vector<RankMemory>> rank_memory(const JobSpec& job, const JobPlan& plan) {
  Result<std::vector<StageActivations>> activations = estimate_activations(job, plan);
  if (!activations) return activations.error();
  std::vector<RankMemory> out;
  for (StageActivations& a : *activations) {
    const std::optional<BytesPerRank> buffers = stage_memory(plan, a.stage);
    if (!buffers) return Error{fmt::format("stage {}: its bytes per rank are too large", a.stage)};
    RankMemory m{a.stage, persistent_terms(*buffers), std::move(a), 0, 0, 0};
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

std::optional<std::int64_t> gpu_memory_bytes(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const Gpu& g : kGpus) {
    if (upper == g.name) return g.mib << 20;
  }
  return std::nullopt;
}

std::string_view known_gpu_names() { return "H100, H200, B200, A100-40, A100-80"; }

}  // namespace paramlayout
