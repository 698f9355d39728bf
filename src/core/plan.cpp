#include "paramlayout/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "paramlayout/version.hpp"
#include "strategies/strategies.hpp"

namespace paramlayout {

using strategies::Wide;

BufferKey buffer_key_of(const Param& param, const PlanOptions& options) {
  BufferKey key;
  key.param_dtype = param.storage == Storage::dense ? param.dtype : DType::uint8;
  key.grad_dtype = options.grad_reduce_in_fp32 ? DType::float32 : param.dtype;
  key.expert_parallel = param.expert_parallel;
  key.layerwise = options.strategy == Strategy::layerwise && param.use_muon &&
                  param.shape.size() == 2 && !param.embedding_or_output;
  return key;
}

Strategy strategy_for(const BufferKey& key, const PlanOptions& options) {
  if (options.strategy == Strategy::layerwise && !key.layerwise) return Strategy::sequential_dp;
  return options.strategy;
}

std::vector<BufferGroup> group_params(const Manifest& manifest, const PlanOptions& options) {
  // Few distinct keys exist (dtypes x expert x layerwise), so linear lookups win.
  std::vector<BufferGroup> groups;
  std::vector<std::pair<BufferKey, std::int64_t>> next_index;  // keyed by the logical dtype
  for (std::size_t i = 0; i < manifest.params.size(); ++i) {
    const Param& param = manifest.params[i];
    const BufferKey key = buffer_key_of(param, options);
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const BufferGroup& g) { return g.key == key; });
    if (group == groups.end()) {
      group = groups.insert(groups.end(), BufferGroup{});
      group->key = key;
      group->num_shards = key.expert_parallel ? options.expert_dp : options.dp;
    }
    BufferKey index_key = key;
    index_key.param_dtype = param.dtype;
    auto counter = std::find_if(next_index.begin(), next_index.end(),
                                [&](const auto& entry) { return entry.first == index_key; });
    if (counter == next_index.end()) counter = next_index.insert(next_index.end(), {index_key, 0});
    group->params.push_back(i);
    group->indices.push_back(counter->second++);
  }
  return groups;
}

namespace strategies {

void BufferBuilder::place(const BufferJob& job, std::size_t k, Wide start,
                          std::int64_t bucket) {
  const Wide end = start + job.param(k).numel;
  max_offset_ = std::max(max_offset_, end);
  out_.params.push_back({job.param(k).name, static_cast<std::int64_t>(start),
                         static_cast<std::int64_t>(end), bucket, job.group.indices[k]});
}

void BufferBuilder::add_bucket(Wide start, Wide end, Wide numel_unpadded) {
  max_offset_ = std::max(max_offset_, end);
  out_.buckets.push_back({static_cast<std::int64_t>(start), static_cast<std::int64_t>(end),
                          static_cast<std::int64_t>(numel_unpadded)});
}

}  // namespace strategies

namespace {

/// Each rank's Newton-Schulz cost under `balanced`, by shard count.
using RankCostsByShards = std::map<std::int64_t, strategies::RankCosts>;

/// Lays out one buffer (its key, strategy and shard count already set) with `options`.
Result<void> lay_out_buffer(const Manifest& manifest, const BufferGroup& group,
                            const PlanOptions& options, BufferLayout& buffer,
                            RankCostsByShards& rank_costs) {
  buffer.buckets.clear();
  buffer.params.clear();
  buffer.numel = buffer.numel_unpadded = 0;
  const strategies::BufferJob job{manifest, group, options};
  strategies::BufferBuilder builder(buffer, group.params.size());
  switch (buffer.strategy) {
    case Strategy::unpadded:
      strategies::lay_out_unpadded(job, builder);
      break;
    case Strategy::sequential_dp:
      strategies::lay_out_sequential_dp(job, builder);
      break;
    case Strategy::layerwise:
      if (Result<void> r = options.packer == Packer::balanced
                               ? strategies::lay_out_layerwise_balanced(
                                     job, builder, rank_costs[group.num_shards])
                               : strategies::lay_out_layerwise(job, builder);
          !r) {
        return r.error();
      }
      break;
  }
  if (!builder.fits()) {
    return Error{fmt::format(
        "{}: buffer {} would need {} elements; offsets must fit in 64 bits (at most {})",
        manifest.source, describe(group.key), static_cast<double>(builder.max_offset()),
        INT64_MAX)};
  }
  buffer.numel = buffer.buckets.empty() ? 0 : buffer.buckets.back().end;
  for (const BucketRange& b : buffer.buckets) buffer.numel_unpadded += b.numel_unpadded;
  return {};
}

}  // namespace

Result<Layout> plan(const Manifest& manifest, const PlanOptions& options) {
  Layout layout;
  layout.generator = std::string("paramlayout ") + std::string(kVersion);
  layout.model = manifest.model;
  layout.manifest_sha256 = manifest.sha256;
  layout.names = manifest.names;
  layout.options = options;

  const std::vector<BufferGroup> groups = group_params(manifest, options);
  RankCostsByShards rank_costs;
  for (const BufferGroup& group : groups) {
    BufferLayout& buffer = layout.buffers.emplace_back();
    buffer.key = group.key;
    buffer.strategy = strategy_for(group.key, options);
    if (buffer.strategy != Strategy::unpadded) buffer.num_shards = group.num_shards;
    if (Result<void> r = lay_out_buffer(manifest, group, options, buffer, rank_costs); !r) {
      return r.error();
    }
  }
  // `balanced` keeps a buffer's packing only where the ranks come out no heavier than under
  // Megatron-LM's, counting the buffers of the same ranks before it; a buffer that fell back
  // can still leave a rank heavier than all of Megatron-LM's would. Then those ranks'
  // buffers are all packed Megatron-LM's way.
  PlanOptions megatron = options;
  megatron.packer = Packer::megatron;
  const auto heaviest = [](const std::vector<strategies::Wide>& costs) {
    return *std::max_element(costs.begin(), costs.end());
  };
  for (const auto& [shards, costs] : rank_costs) {
    if (heaviest(costs.kept) <= heaviest(costs.megatron)) continue;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      BufferLayout& buffer = layout.buffers[i];
      if (buffer.strategy != Strategy::layerwise || groups[i].num_shards != shards) continue;
      if (Result<void> r = lay_out_buffer(manifest, groups[i], megatron, buffer, rank_costs);
          !r) {
        return r.error();
      }
    }
  }
  return layout;
}

}  // namespace paramlayout
