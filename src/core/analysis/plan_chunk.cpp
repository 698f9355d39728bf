#include "paramlayout/plan_chunk.hpp"

#include <chrono>

#include "paramlayout/plan.hpp"

namespace paramlayout {

Result<ChunkPlan> plan_chunk(const Manifest& manifest, const PlanOptions& options,
                             double* plan_ms) {
  const auto start = std::chrono::steady_clock::now();
  Result<Layout> layout = plan(manifest, options);
  if (!layout) return layout.error();
  if (plan_ms != nullptr) {
    *plan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  Result<LayoutStats> stats = layout_stats(*layout, manifest);
  if (!stats) return stats.error();
  return ChunkPlan{std::move(*layout), std::move(*stats)};
}

}  // namespace paramlayout
