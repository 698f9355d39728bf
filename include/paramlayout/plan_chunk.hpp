// One path from a model chunk to its layout: plan its manifest, then weigh the layout. The
// plan and job commands go through it; the far-off advice (alternatives.hpp) plans its
// alternatives with the same plan and weighs them by their footprint alone.
#pragma once

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// A chunk's layout and its figures.
struct ChunkPlan {
  Layout layout;
  LayoutStats stats;
};

/// Plans every buffer of `manifest` (plan) and computes the layout's figures (layout_stats,
/// the structure checked first unless `trusted`); with `plan_ms`, the milliseconds spent
/// planning. Fails when an offset or a figure would not fit in 64 bits, so that every layout
/// it returns can be written and read back.
Result<ChunkPlan> plan_chunk(const Manifest& manifest, const PlanOptions& options,
                             double* plan_ms = nullptr,
                             LayoutStructure structure = LayoutStructure::check);

/// Whether `a` and `b` hold the same params in the same order in everything but their names
/// (shapes, dtypes, storage, flags): the planner never reads a name, so one layout serves
/// both, each under its own names.
bool same_but_names(const Manifest& a, const Manifest& b);

/// `planned`, the plan of `planned_for`, as the plan of `manifest` (same_but_names with
/// `planned_for`): each slot takes the name of the param at its position in `manifest` (the
/// names `planned` keeps where they are the same).
ChunkPlan relabel_plan(const ChunkPlan& planned, const Manifest& planned_for,
                       const Manifest& manifest);

}  // namespace paramlayout
