// Grouping params into buffers: which buffer each param belongs to, and the strategy that
// lays that buffer out (docs/strategies.md, Grouping params into buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// The buffer a param belongs to under `options` (docs/strategies.md, Grouping params
/// into buffers).
BufferKey buffer_key_of(const Param& param, const PlanOptions& options);

/// The params of one buffer, in manifest order.
struct BufferGroup {
  BufferKey key;
  std::int64_t num_shards = 1;        ///< expert_dp for expert-parallel buffers, else dp
  std::vector<std::size_t> params;    ///< positions in Manifest::params
  std::vector<std::int64_t> indices;  ///< each param's `index` counter value
};

/// Groups params into buffers, in the order their key first appears in the manifest.
std::vector<BufferGroup> group_params(const Manifest& manifest, const PlanOptions& options);

/// The strategy that lays out buffer `key` under `options`.
Strategy strategy_for(const BufferKey& key, const PlanOptions& options);

}  // namespace paramlayout
