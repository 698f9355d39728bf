// A rank's memory on each pipeline stage: what stays allocated between steps (exact, as
// Megatron-LM's DDP and optimizer allocate it) and the activations it holds at its peak
// (estimated), and whether that fits a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/activations.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/memory_term.hpp"

namespace paramlayout {

/// One rank of one pipeline stage (its chunks together).
struct RankMemory {
  std::int64_t stage = 0;
  std::vector<MemoryTerm> persistent;  ///< allocated between steps; every term exact
  StageActivations activations;        ///< held for backward at the peak; estimates
  std::int64_t persistent_bytes = 0;
  std::int64_t activation_bytes = 0;  ///< 0 without --seq-length
  std::int64_t peak_bytes = 0;        ///< persistent + activations

  /// Whether the launch gave what the activations need (its --seq-length).
  bool has_activations() const { return !activations.terms.empty(); }

  bool operator==(const RankMemory&) const = default;
};

/// Every stage's rank memory, in order; fails when a figure does not fit in 64 bits.
Result<std::vector<RankMemory>> rank_memory(const JobSpec& job, const JobPlan& plan);

/// The launch's activation inputs in a line: "micro batch 1 x sequence 4096, 8 micro-batches
/// per step, 1F1B, selective recompute"; "" without --seq-length.
std::string describe_activation_inputs(const JobSpec& job);

/// The stage whose peak is the largest (the first of them).
std::int64_t heaviest_peak_stage(const std::vector<RankMemory>& stages);

/// A GPU paramlayout knows by name, with its memory as its driver reports it (nvidia-smi's
/// memory.total).
struct KnownGpu {
  std::string_view name;  ///< as paramlayout spells it: "H100"
  std::int64_t bytes = 0;
};

/// The GPU `name` names: "H100", "H200", "B200", "A100-40", "A100-80" (any case; "A100" is
/// the 80 GB one). nullopt for a name it does not know.
std::optional<KnownGpu> find_gpu(std::string_view name);

/// The names find_gpu knows, for messages: "H100, H200, B200, A100-40, A100-80".
std::string_view known_gpu_names();

}  // namespace paramlayout
