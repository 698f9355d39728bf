// Human-readable summaries for the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/stats.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {

/// Per buffer: key, params, buckets, numel, padding %, bytes per rank of params and grads.
void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout,
                        const LayoutStats& stats);

/// Padding and its floor, Newton-Schulz balance, memory per rank: a few lines.
void print_stats(std::FILE* out, const LayoutStats& stats);

/// One model chunk of a pipeline, for print_pipeline_summary.
struct ChunkSummary {
  std::string name;
  const Layout* layout = nullptr;
  const LayoutStats* stats = nullptr;  ///< of `layout`
};

/// Per chunk (pipeline stage): params, numel, padding, bytes per rank of params and grads,
/// and the largest, which decides the memory a job needs.
void print_pipeline_summary(std::FILE* out, const std::vector<ChunkSummary>& chunks);

}  // namespace paramlayout::cli
