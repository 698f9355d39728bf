// A job's memory per rank for people: each stage's persistent bytes (exact), activations and
// peak (estimated), and whether the peak fits the GPU the user names.
#pragma once

#include <CLI/CLI.hpp>

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

/// `--gpu-memory` and `--headroom`, as `job` and `stats JOB` take them.
struct GpuMemoryOptions {
  std::string gpu;          ///< "", GiB ("80", "79.5") or a GPU's name (find_gpu)
  double headroom_gib = 4;  ///< set aside for what the figures do not model

  std::int64_t headroom_bytes() const;
};
void add_gpu_memory_options(CLI::App& sub, GpuMemoryOptions& options);

/// The GPU `--gpu-memory` names; nullopt without it.
Result<std::optional<GpuBudget>> gpu_budget(const GpuMemoryOptions& options);

/// Per stage (`inputs`: what the activations are estimated for): micro-batches in flight,
/// persistent, activations, peak and, with `gpu`, the room left (or missing) once `headroom` bytes
/// are set aside; then the heaviest rank by peak and what the figures leave out.
void print_memory_table(std::FILE* out, const std::string& inputs,
                        const std::vector<RankMemory>& stages, const std::optional<GpuBudget>& gpu,
                        std::int64_t headroom);

}  // namespace paramlayout::cli
