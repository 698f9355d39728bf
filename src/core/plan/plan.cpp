#include "paramlayout/plan.hpp"

#include <map>

#include "layerwise/layerwise.hpp"
#include "paramlayout/version.hpp"
#include "strategies/strategies.hpp"

namespace paramlayout {

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
    Result<void> laid_out = buffer.strategy == Strategy::layerwise
                                ? layerwise_by_shards.try_emplace(group.num_shards, options.packer)
                                      .first->second.lay_out(job, i, buffer)
                                : lay_out_buffer(job, buffer);
    if (!laid_out) return laid_out.error();
  }
  for (auto& [shards, chooser] : layerwise_by_shards) chooser.settle(layout.buffers);
  for (BufferLayout& buffer : layout.buffers) {
    if (buffer.key.param_dtype != DType::uint8) continue;  // only quantized storage is uint8
    Result<ParamBufferLayout> params = quantized_param_buffer(buffer, manifest, options);
    if (!params) return params.error();
    buffer.param_buffer = std::move(*params);
  }
  return layout;
}

}  // namespace paramlayout
