#include "paramlayout/grouping.hpp"

#include <algorithm>
#include <utility>

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

}  // namespace paramlayout
