// The activation memory of each pipeline stage's ranks, estimated term by term from the
// launch's micro-batch, sequence length, schedule, parallel sizes and recompute choices.
#pragma once

#include <cstdint>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/memory_term.hpp"

namespace paramlayout {

/// What one rank of a pipeline stage holds for backward at its peak: each term already counts
/// the micro-batches in flight on that stage.
struct StageActivations {
  std::int64_t stage = 0;
  std::int64_t microbatches_in_flight = 0;
  std::vector<MemoryTerm> terms;  ///< every term an estimate

  bool operator==(const StageActivations&) const = default;
};

/// Micro-batches per step on each data-parallel rank: global batch / (micro batch x dp), at
/// least 1 (megatron/core/num_microbatches_calculator.py:386).
std::int64_t microbatches_per_step(const JobSpec& job);

/// One entry per pipeline stage, in order; no terms where the launch gives no --seq-length.
/// Fails when a figure does not fit in 64 bits.
Result<std::vector<StageActivations>> estimate_activations(const JobSpec& job, const JobPlan& plan);

}  // namespace paramlayout
