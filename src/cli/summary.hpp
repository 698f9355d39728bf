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

/// Per buffer: key, params, buckets, numel, padding %, bytes per rank of params and grads;
/// then print_stats.
void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout,
                        const LayoutStats& stats, double link_gbps = 0);

/// Padding and its floor, Newton-Schulz balance, memory per rank and traffic per step: a few
/// lines; with `link_gbps` > 0, also the ring model's estimate of the collectives' time.
void print_stats(std::FILE* out, const LayoutStats& stats, double link_gbps = 0);

/// Per buffer: the ranks, buckets and bucket sizes of its collectives, the bytes they move per
/// step and rank, and the padding's share of what is sent.
void print_traffic_table(std::FILE* out, const Layout& layout, const LayoutStats& stats);

/// One model chunk of a pipeline, for print_pipeline_summary.
struct ChunkSummary {
  std::string name;
  const Layout* layout = nullptr;
  const LayoutStats* stats = nullptr;  ///< of `layout`
};

/// Per chunk (pipeline stage): params, numel, padding, bytes per rank of params and grads;
/// then the heaviest chunk (the most bytes per rank with optimizer state), which decides the
/// memory a job needs.
void print_pipeline_summary(std::FILE* out, const std::vector<ChunkSummary>& chunks);

/// On stderr, a warning when `layout` pads far more than another plan of `manifest` would
/// (padding_advice): why, and what would pad less. `name` names the manifest.
void warn_if_far_off(const std::string& name, const Manifest& manifest, const Layout& layout,
                     const LayoutStats& stats);

}  // namespace paramlayout::cli
