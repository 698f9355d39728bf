// The balanced packer's bins: a bucket is dp bins (shards) of one capacity, and its params
// are items of their aligned sizes (spans). Items in best-fit-decreasing order, and
// best-fit-decreasing itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "paramlayout/layout.hpp"
#include "strategies/buffer_builder.hpp"

namespace paramlayout::layerwise {

using strategies::Wide;

/// Element counts in the balanced packer. Every size it meets fits in 64 bits: it plans only
/// buffers of less than 2^60 / dp elements.
using Size = std::int64_t;

/// A bucket's shards: how many, and what each one's size is a multiple of.
struct Shards {
  std::int64_t count;
  Size divisor;

  Size pad(Size size) const { return pad_to(size, divisor); }
};

/// The params at positions [from, to) of a buffer by decreasing span, ties in position
/// order (best-fit-decreasing's order), in runs of one span.
struct Items {
  struct Run {
    Size span;
    std::size_t first, end;  ///< into `positions`
  };
  std::size_t from = 0;
  std::vector<std::size_t> positions;
  std::vector<Run> runs;  ///< largest span first
  Size gcd = 0;           ///< of the spans: capacities between two of its multiples pack alike

  std::size_t size() const { return positions.size(); }
  Size total() const;
  Size largest() const { return runs.empty() ? 0 : runs.front().span; }
};

/// Positions [from, to) of params whose spans are `span` (by position) as Items.
Items by_decreasing_span(std::span<const Size> span, std::size_t from, std::size_t to);

/// The bin of each item of a bucket, by position from the bucket's first.
using BinOf = std::vector<std::int64_t>;

/// Best-fit-decreasing of `items` into `bins` bins of `capacity`: each item, largest first,
/// to the fullest bin it fits in (the first on ties). What the fullest bin holds, or nothing
/// when an item finds no room; with `bin_of`, also where each item went.
std::optional<Size> best_fit(const Items& items, std::int64_t bins, Size capacity,
                             BinOf* bin_of = nullptr);

}  // namespace paramlayout::layerwise
