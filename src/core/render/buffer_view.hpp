// One buffer of a layout's picture: its buckets as bands (rows) across columns of ranks,
// params as boxes in them, what each rank's shards hold, and an axis of rank numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "palette.hpp"
#include "paramlayout/layout.hpp"

namespace paramlayout::render {

/// The page's horizontal geometry: the plot spans [kPlotLeft, kPlotLeft + kPlotWidth).
inline constexpr double kPageWidth = 1200;
inline constexpr double kMargin = 20;
inline constexpr double kPlotLeft = 96;
inline constexpr double kPlotWidth = kPageWidth - kMargin - kPlotLeft;

/// A param's box, or part of one: its elements in one column, or the columns it fills whole.
struct Piece {
  std::size_t param = 0;     ///< index in the buffer's params
  std::int64_t column = 0;   ///< its first column
  std::int64_t columns = 1;  ///< the columns it spans (more than one only where it fills them)
  double top = 0;            ///< pixels from the buffer's plot top
  double height = 0;
  std::int64_t elements = 0;
  bool first = false;  ///< the param's first piece, which names it
};

/// Where a buffer's elements are drawn. Columns are groups of consecutive ranks, as many
/// ranks each as keep a column a few pixels wide; within a column each bucket is a band, its
/// elements top to bottom (the column's ranks' shards one after the other).
class BufferView {
 public:
  explicit BufferView(const BufferLayout& buffer);

  /// Calls `f(const Piece&)` for every piece of every param, in the params' order.
  template <class F>
  void for_each_piece(F&& f) const;

  /// The plot's height in pixels.
  double plot_height() const { return plot_height_; }

  /// Draws the buffer with its top at `y`: header, bands, the pieces at least
  /// `min_height` pixels tall as named boxes (the rest merged), what each column's shards
  /// hold, and the rank axis. Records the colours used. Returns the y below it.
  double draw(std::string& out, double y, std::size_t index, const Palette& palette,
              double min_height, std::vector<bool>& used) const;

 private:
  double x_of_rank(std::int64_t rank) const;
  std::int64_t column_first_rank(std::int64_t column) const { return column * ranks_per_column_; }
  std::int64_t column_ranks(std::int64_t column) const;
  /// Appends the bands' backgrounds (padding, unless a box covers it) and labels.
  void draw_bands(std::string& out, double top) const;
  /// Appends the lines between columns and between buckets, where they are far enough apart
  /// not to darken the picture.
  void draw_grid(std::string& out, double top) const;
  /// Appends, per column, the share of its ranks' shards that holds params.
  void draw_shard_use(std::string& out, double top) const;
  /// Appends the rank axis.
  void draw_axis(std::string& out, double top) const;

  const BufferLayout& buffer_;
  std::int64_t shards_ = 1;
  std::int64_t ranks_per_column_ = 1;
  std::int64_t columns_ = 1;
  std::vector<double> band_top_;     ///< per bucket, from the plot's top
  std::vector<double> band_height_;  ///< per bucket
  double plot_height_ = 0;
};

template <class F>
void BufferView::for_each_piece(F&& f) const {
  for (std::size_t i = 0; i < buffer_.params.size(); ++i) {
    const ParamSlot& p = buffer_.params[i];
    const auto j = static_cast<std::size_t>(p.bucket);
    const BucketRange& bucket = buffer_.buckets[j];
    const std::int64_t shard = bucket.size() / shards_;
    // Elements [start, end) of column c, and its pixels per element.
    const auto start = [&](std::int64_t c) {
      return bucket.start + std::min(shards_, column_first_rank(c)) * shard;
    };
    const auto scale = [&](std::int64_t c) {
      return band_height_[j] / static_cast<double>(column_ranks(c) * shard);
    };
    const std::int64_t first = (p.start - bucket.start) / shard / ranks_per_column_;
    const std::int64_t last = (p.end - 1 - bucket.start) / shard / ranks_per_column_;
    const std::int64_t first_end = std::min(p.end, start(first + 1));
    f(Piece{i, first, 1, band_top_[j] + static_cast<double>(p.start - start(first)) * scale(first),
            static_cast<double>(first_end - p.start) * scale(first), first_end - p.start, true});
    if (last > first + 1) {
      f(Piece{i, first + 1, last - first - 1, band_top_[j], band_height_[j],
              start(last) - start(first + 1), false});
    }
    if (last > first) {
      f(Piece{i, last, 1, band_top_[j], static_cast<double>(p.end - start(last)) * scale(last),
              p.end - start(last), false});
    }
  }
}

}  // namespace paramlayout::render
