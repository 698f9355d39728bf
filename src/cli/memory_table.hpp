// A job's memory per rank for people: each stage's persistent bytes (exact), activations and
// peak (estimated), and whether the peak fits the GPU the user names.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/rank_memory.hpp"

namespace paramlayout::cli {

/// The GPU the peak is held against.
struct GpuBudget {
  std::string name;  ///< "H100" or "" for a size the user gave in GiB
  std::int64_t bytes = 0;
};

/// `--gpu-memory`: a size in GiB ("80", "79.5") or a GPU's name (gpu_memory_bytes).
Result<GpuBudget> parse_gpu_memory(const std::string& text);

/// The launch's activation inputs in a line: "micro batch 1 x sequence 4096, 8 micro-batches
/// per step, 1F1B, selective recompute".
std::string describe_activation_inputs(const JobSpec& job);

/// Per stage: micro-batches in flight, persistent, activations, peak and, with `gpu`, the
/// room left (or missing) once `headroom` bytes are set aside; then the heaviest rank by peak
/// and what the figures leave out.
void print_memory_table(std::FILE* out, const JobSpec& job, const std::vector<RankMemory>& stages,
                        const std::optional<GpuBudget>& gpu, std::int64_t headroom);

}  // namespace paramlayout::cli
