#include "paramlayout/plan.hpp"

#include <algorithm>
#include <map>

#include "paramlayout/version.hpp"
#include "layerwise/layerwise.hpp"
#include "strategies/strategies.hpp"

namespace paramlayout {

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

namespace {

/// Lays out one buffer of a strategy other than layerwise (its key, strategy and shard
/// count already set).
Result<void> lay_out_buffer(const strategies::BufferJob& job, BufferLayout& buffer) {
  strategies::BufferBuilder builder(job, buffer);
  if (buffer.strategy == Strategy::unpadded) {
    strategies::lay_out_unpadded(job, builder);
  } else {
    strategies::lay_out_sequential_dp(job, builder);
  }
  return builder.finish();
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
  // The layerwise buffers of one shard count share their ranks, whose costs add up.
  std::map<std::int64_t, layerwise::Chooser> layerwise_by_shards;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const BufferGroup& group = groups[i];
    BufferLayout& buffer = layout.buffers.emplace_back();
    buffer.key = group.key;
    buffer.strategy = strategy_for(group.key, options);
    if (buffer.strategy != Strategy::unpadded) buffer.num_shards = group.num_shards;
    const strategies::BufferJob job{manifest, group, options};
    Result<void> laid_out =
        buffer.strategy == Strategy::layerwise
            ? layerwise_by_shards.try_emplace(group.num_shards, options.packer)
                  .first->second.lay_out(job, i, buffer)
            : lay_out_buffer(job, buffer);
    if (!laid_out) return laid_out.error();
  }
  for (auto& [shards, chooser] : layerwise_by_shards) chooser.settle(layout.buffers);
  return layout;
}

}  // namespace paramlayout
