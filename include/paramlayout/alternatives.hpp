// The same manifest planned with other options, to tell a layout that is far off what its
// model could have: a layerwise plan whose shards must each hold a matrix far larger than
// their share of the params, or a packer that pads much more than another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// Another plan of the same manifest and what it needs.
struct Alternative {
  std::string options;  ///< the plan options that differ, as `plan` takes them
  PlanOptions plan_options;
  LayoutFootprint footprint;
};

/// Why a layout pads far more than it must, and what would pad less.
struct PaddingAdvice {
  /// The layerwise buffer whose largest param sets the floor, when the floor is most of the
  /// padding: each rank's shard of a bucket must hold that param whole.
  std::optional<std::string> largest_param;
  std::int64_t largest_param_elements = 0;
  std::int64_t shards = 0;
  /// The most shards whose buckets that buffer's params could fill: its param elements over
  /// the largest param's.
  std::int64_t shards_without_forced_padding = 0;
  /// The layerwise alternative that needs the least memory per rank, if it beats the plan.
  std::optional<Alternative> better_layerwise;
  /// The same manifest under sequential-dp (no layerwise optimizer), for scale.
  std::optional<Alternative> sequential_dp;
};

/// Advice for a layerwise `layout` (planned from `manifest`, with `stats`) that pads at least
/// 25% of its buffers and needs at least 1.25 times the memory per rank of another plan of the
/// same manifest; nullopt otherwise. Plans alternatives only as far as the advice needs: none
/// below that padding; only sequential-dp's (cheap) when no layerwise plan could need 1.25
/// times less than this one (each needs at least its buffers' floors); then only the
/// layerwise alternatives whose floors could beat the best one so far. They are weighed by
/// their footprint, without costs or traffic.
std::optional<PaddingAdvice> padding_advice(const Manifest& manifest, const Layout& layout,
                                            const LayoutStats& stats);

}  // namespace paramlayout
