// Static validation: every promise of docs/strategies.md ("What a layout promises") and the
// match between a layout and its manifest. The engine behind `check` and `verify`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
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

/// The promises a layout keeps on its own, without its manifest: options and buffers agree,
/// buckets are contiguous from 0 and sized as their strategy requires, params are sorted,
/// disjoint, aligned and inside a bucket of their buffer (layerwise ones inside one shard),
/// numel and numel_unpadded add up, and names and buffer keys are unique. Everything that
/// reads a layout's geometry (stats, render, diff) may rely on these.
std::vector<Violation> check_structure(const Layout& layout);

/// Ok when check_structure finds nothing; else an error naming `layout.source` and the
/// first broken promise.
Result<void> validate_structure(const Layout& layout);

/// Where the layout's recorded `stats` member disagrees with the figures `layout_stats`
/// gives for the layout and `manifest`: each value it holds of a key paramlayout writes,
/// integers exactly and ratios to the precision they are written with. Keys it lacks or that
/// paramlayout does not write are not reported; nothing when the layout has no `stats` or
/// breaks a promise of check_structure (check_layout reports that).
std::vector<Violation> check_recorded_stats(const Layout& layout, const Manifest& manifest);

/// Plans `manifest` again with the layout's recorded options and reports each difference
/// in the contract fields: a layout that holds but is stale or hand-edited.
std::vector<Violation> compare_with_replan(const Layout& layout, const Manifest& manifest);

}  // namespace paramlayout
