// Static validation: every promise of docs/strategies.md ("What a layout promises") and the
// match between a layout and its manifest. The engine behind `check` and `verify`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// One broken promise: where (buffer, bucket, param) and what was expected.
struct Violation {
  std::string where;  ///< e.g. `buffer 1 (bfloat16/bfloat16 layerwise), bucket 3, param "w"`
  std::string what;   ///< e.g. `starts at 100, not a multiple of 64`

  std::string message() const { return where.empty() ? what : where + ": " + what; }
};

/// Every broken promise of `layout`, checked against the manifest it claims to come from.
/// Structure is checked whatever the manifest; params are matched by name.
std::vector<Violation> check_layout(const Layout& layout, const Manifest& manifest);

/// Plans `manifest` again with the layout's recorded options and reports each difference
/// in the contract fields: a layout that holds but is stale or hand-edited.
std::vector<Violation> compare_with_replan(const Layout& layout, const Manifest& manifest);

/// The data-parallel ranks that own elements [start, end) of `bucket` in a buffer sharded
/// over `num_shards` ranks: first and last (inclusive). Requires start < end, both inside
/// the bucket and its size divisible by `num_shards`.
struct RankRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  bool operator==(const RankRange&) const = default;
};
RankRange owner_ranks(const BucketRange& bucket, std::int64_t num_shards, std::int64_t start,
                      std::int64_t end);

}  // namespace paramlayout
