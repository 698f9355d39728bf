#include "paramlayout/plan_chunk.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "paramlayout/plan.hpp"

namespace paramlayout {

Result<ChunkPlan> plan_chunk(const Manifest& manifest, const PlanOptions& options, double* plan_ms,
                             LayoutStructure structure) {
  const auto start = std::chrono::steady_clock::now();
  Result<Layout> layout = plan(manifest, options);
  if (!layout) return layout.error();
  if (plan_ms != nullptr) {
    *plan_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  Result<LayoutStats> stats = layout_stats(*layout, manifest, structure);
  if (!stats) return stats.error();
  return ChunkPlan{std::move(*layout), std::move(*stats)};
}

bool same_but_names(const Manifest& a, const Manifest& b) {
  const auto same = [](const Param& x, const Param& y) {
    return x.shape == y.shape && x.numel == y.numel && x.dtype == y.dtype &&
           x.storage == y.storage && x.expert_parallel == y.expert_parallel &&
           x.shared_embedding == y.shared_embedding &&
           x.embedding_or_output == y.embedding_or_output && x.use_muon == y.use_muon &&
           x.gtp_remat_size == y.gtp_remat_size;
  };
  return std::equal(a.params.begin(), a.params.end(), b.params.begin(), b.params.end(), same);
}

ChunkPlan relabel_plan(const ChunkPlan& planned, const Manifest& planned_for,
                       const Manifest& manifest) {
  ChunkPlan out = planned;
  out.layout.model = manifest.model;
  out.layout.manifest_sha256 = manifest.sha256;
  // Megatron-LM names a chunk's layers from 0, so repeated stages' names are most often the
  // same: the layout keeps the names it has (its store is shared, not copied).
  const auto same_name = [](const Param& a, const Param& b) { return a.name == b.name; };
  if (std::equal(planned_for.params.begin(), planned_for.params.end(), manifest.params.begin(),
                 manifest.params.end(), same_name)) {
    return out;
  }
  std::unordered_map<std::string_view, std::string_view> renamed;
  renamed.reserve(planned_for.params.size());
  for (std::size_t i = 0; i < planned_for.params.size(); ++i) {
    renamed.emplace(planned_for.params[i].name, manifest.params[i].name);
  }
  const auto relabel = [&](std::string_view& name) {
    if (const auto it = renamed.find(name); it != renamed.end()) name = it->second;
  };
  out.layout.names = manifest.names;
  for (BufferLayout& b : out.layout.buffers) {
    for (ParamSlot& slot : b.params) relabel(slot.name);
    for (ParamSlot& slot : b.param_buffer.params) relabel(slot.name);
  }
  for (BufferStats& b : out.stats.buffers) relabel(b.largest_param);
  return out;
}

}  // namespace paramlayout
