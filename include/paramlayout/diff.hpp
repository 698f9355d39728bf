// What changed between two layouts: a model revision, a new dp, another strategy or packer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"

namespace paramlayout {

/// Where a param sits in one layout.
struct Placement {
  BufferKey key;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t bucket = 0;
  /// The ranks that own its optimizer state; nullopt when every rank keeps a full copy
  /// (an unpadded buffer, or a range that no valid bucket holds).
  std::optional<RankRange> owners;
};

/// A param present in either layout whose placement changed, or that came or went.
struct ParamChange {
  std::string_view name;
  std::optional<Placement> before;
  std::optional<Placement> after;
  bool resized = false;        ///< in both, numel differs
  bool moved = false;          ///< in both, same numel, other buffer key or start
  bool owner_changed = false;  ///< in both, the set of owning ranks differs
};

/// One buffer key's figures before and after (nullopt where the layout has no such buffer).
struct BufferFigures {
  std::int64_t params = 0;
  std::int64_t buckets = 0;
  std::int64_t numel = 0;
  std::int64_t padding = 0;
  std::optional<std::int64_t> num_shards;
};
struct BufferChange {
  BufferKey key;
  std::optional<BufferFigures> before;
  std::optional<BufferFigures> after;
  bool contract_differs = false;  ///< buckets, num_shards, numels or any slot differ
};

/// Bytes each rank holds for the param and grad buffers (DDP keeps them whole on every rank).
struct RankBytes {
  std::int64_t params = 0;
  std::int64_t grads = 0;
};

/// One planning option that differs: its key in the layouts' `options` and both values as
/// JSON text (`16`, `"layerwise"`, `null`).
struct OptionChange {
  std::string_view name;
  std::string before;
  std::string after;
};

struct LayoutDiff {
  std::vector<OptionChange> options;  ///< in the order of the layouts' `options`
  /// What makes the param changes below compare unlike things: other models, other
  /// manifests. Sentences for people.
  std::vector<std::string> warnings;
  std::vector<ParamChange> changes;  ///< NEW's order, then params only in OLD
  std::vector<BufferChange> buffers;
  RankBytes bytes_before;
  RankBytes bytes_after;
  /// Elements of optimizer state whose owning rank changes (params in both, same numel).
  std::int64_t owner_changed_elements = 0;

  std::size_t count(bool ParamChange::*flag) const;
  std::size_t added() const;
  std::size_t removed() const;
  /// True when every contract field of the two layouts (options included) is the same.
  bool identical() const;
  /// One line: "identical", or "options changed: dp; 12 params moved, 3 added, ...".
  std::string verdict() const;
};

/// The differences; fails when either layout breaks a promise of check_structure or a figure
/// does not fit in 64 bits.
Result<LayoutDiff> diff_layouts(const Layout& before, const Layout& after);

/// The diff as one JSON object: `identical`, `verdict`, `options` (each change with `option`,
/// `before` and `after`), `warnings`, the lists `added`, `removed`, `resized`, `moved`,
/// `owner_changed` (param names), and the figures behind them.
std::string diff_to_json(const LayoutDiff& diff);

}  // namespace paramlayout
