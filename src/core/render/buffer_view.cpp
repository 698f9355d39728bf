#include "buffer_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "paramlayout/stats.hpp"
#include "paramlayout/text.hpp"
#include "svg.hpp"

namespace paramlayout::render {
namespace {

constexpr double kMinColumn = 4;         ///< columns narrower than this group more ranks
constexpr double kBufferHeight = 320;    ///< all of a buffer's bands together
constexpr std::size_t kFewBuckets = 24;  ///< up to this many, every band is labelled
constexpr double kMinBand = 14;          ///< a labelled band's least height
constexpr double kBandGap = 2;
constexpr double kMergeGap = 1;   ///< small pieces this close merge into one box
constexpr double kMaxMerged = 6;  ///< ... unless it would grow taller than this
constexpr double kHeader = 40;    ///< the two header lines
constexpr double kShardUse = 16;  ///< the strip of what each column's shards hold

/// Small pieces of one column merged as they come, top to bottom, in the colour that covers
/// most of it.
struct Run {
  double top = 0;
  double bottom = -1;       ///< < top: no run
  std::int64_t params = 0;  ///< params whose first piece it holds
  std::int64_t elements = 0;
  std::vector<double> height_by_colour;

  bool empty() const { return bottom < top; }
  void clear() {
    bottom = top - 1;
    params = elements = 0;
    std::fill(height_by_colour.begin(), height_by_colour.end(), 0.0);
  }
  Colour colour() const {
    return static_cast<Colour>(std::max_element(height_by_colour.begin(), height_by_colour.end()) -
                               height_by_colour.begin());
  }
};

}  // namespace

BufferView::BufferView(const BufferLayout& buffer) : buffer_(buffer) {
  shards_ = buffer.num_shards.value_or(1);
  const auto most_columns = static_cast<std::int64_t>(kPlotWidth / kMinColumn);
  while ((shards_ + ranks_per_column_ - 1) / ranks_per_column_ > most_columns) {
    ranks_per_column_ *= 2;
  }
  columns_ = (shards_ + ranks_per_column_ - 1) / ranks_per_column_;
  const bool few = buffer.buckets.size() <= kFewBuckets;
  double y = 0;
  for (const BucketRange& bucket : buffer.buckets) {
    const double share = static_cast<double>(bucket.size()) / static_cast<double>(buffer.numel);
    band_top_.push_back(y);
    band_height_.push_back(few ? std::max(kMinBand, share * kBufferHeight) : share * kBufferHeight);
    y += band_height_.back() + (few ? kBandGap : 0);
  }
  plot_height_ = std::max(y, kMinBand);
}

double BufferView::x_of_rank(std::int64_t rank) const {
  return kPlotLeft + kPlotWidth * static_cast<double>(rank) / static_cast<double>(shards_);
}

std::int64_t BufferView::column_ranks(std::int64_t column) const {
  return std::min(shards_, column_first_rank(column) + ranks_per_column_) -
         column_first_rank(column);
}

void BufferView::draw_bands(std::string& out, double top) const {
  const bool few = buffer_.buckets.size() <= kFewBuckets;
  if (few) {
    for (std::size_t j = 0; j < buffer_.buckets.size(); ++j) {
      const BucketRange& b = buffer_.buckets[j];
      const double y = top + band_top_[j];
      out += fmt::format(
          "<text x=\"{}\" y=\"{:.1f}\" class=\"s\">bucket {}</text>\n"
          "<rect class=\"pad\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
          "height=\"{:.1f}\"><title>bucket {}: [{}, {}), {} elements of padding"
          "</title></rect>\n",
          kMargin, y + 10, j, kPlotLeft, y, kPlotWidth, band_height_[j], j, b.start, b.end,
          group_digits(b.size() - b.numel_unpadded));
    }
    return;
  }
  out += fmt::format(
      "<rect class=\"pad\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{:.1f}\"/>\n<text x=\"{}\" y=\"{:.1f}\" class=\"s\">{} buckets"
      "</text>\n",
      kPlotLeft, top, kPlotWidth, plot_height_, kMargin, top + 10, buffer_.buckets.size());
}

void BufferView::draw_grid(std::string& out, double top) const {
  const bool few = buffer_.buckets.size() <= kFewBuckets;
  std::string lines;
  double last_line = top;
  for (std::size_t j = 1; j < buffer_.buckets.size() && !few; ++j) {
    const double y = top + band_top_[j];
    if (y - last_line < 3) continue;
    lines += fmt::format("M{:.1f} {:.1f}H{:.1f}", kPlotLeft, y, kPlotLeft + kPlotWidth);
    last_line = y;
  }
  // Column borders where columns are wide enough for them not to darken the picture.
  if (kPlotWidth / static_cast<double>(columns_) >= 12) {
    for (std::int64_t c = 1; c < columns_; ++c) {
      const double x = x_of_rank(column_first_rank(c));
      if (few) {  // between bands only: their gaps stay white
        for (std::size_t j = 0; j < band_top_.size(); ++j) {
          lines += fmt::format("M{:.1f} {:.1f}v{:.1f}", x, top + band_top_[j], band_height_[j]);
        }
      } else {
        lines += fmt::format("M{:.1f} {:.1f}V{:.1f}", x, top, top + plot_height_);
      }
    }
  }
  if (!lines.empty()) out += fmt::format("<path class=\"grid\" d=\"{}\"/>\n", lines);
}

void BufferView::draw_shard_use(std::string& out, double top) const {
  // Param elements per column: partial pieces directly, whole columns through a difference
  // array of shard sizes (a param filling many columns costs O(1)).
  std::vector<double> held(static_cast<std::size_t>(columns_), 0.0);
  std::vector<double> whole_shards(static_cast<std::size_t>(columns_) + 1, 0.0);
  for_each_piece([&](const Piece& p) {
    if (p.columns == 1) {
      held[static_cast<std::size_t>(p.column)] += static_cast<double>(p.elements);
      return;
    }
    const double shard =
        static_cast<double>(p.elements) /
        static_cast<double>(std::min(shards_, column_first_rank(p.column + p.columns)) -
                            column_first_rank(p.column));
    whole_shards[static_cast<std::size_t>(p.column)] += shard;
    whole_shards[static_cast<std::size_t>(p.column + p.columns)] -= shard;
  });
  out += fmt::format(
      "<rect class=\"pad\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{}\"/>\n<text x=\"{}\" y=\"{:.1f}\" class=\"s\">shard filled</text>\n",
      kPlotLeft, top, kPlotWidth, kShardUse, kMargin, top + 10);
  const double per_rank = static_cast<double>(buffer_.numel) / static_cast<double>(shards_);
  std::vector<double> share(static_cast<std::size_t>(columns_));
  double running = 0;
  for (std::int64_t c = 0; c < columns_; ++c) {
    running += whole_shards[static_cast<std::size_t>(c)];
    const double ranks = static_cast<double>(column_ranks(c));
    share[static_cast<std::size_t>(c)] =
        per_rank > 0
            ? std::clamp((held[static_cast<std::size_t>(c)] + running * ranks) / (per_rank * ranks),
                         0.0, 1.0)
            : 0.0;
  }
  // Neighbours that look the same are one box.
  for (std::int64_t c = 0; c < columns_;) {
    const double s = share[static_cast<std::size_t>(c)];
    std::int64_t end = c + 1;
    while (end < columns_ &&
           std::round(1000 * share[static_cast<std::size_t>(end)]) == std::round(1000 * s)) {
      ++end;
    }
    const std::int64_t first = column_first_rank(c);
    const std::int64_t last = std::min(shards_, column_first_rank(end)) - 1;
    const double x0 = x_of_rank(first);
    const double x1 = x_of_rank(last + 1);
    out += fmt::format(
        "<rect class=\"use\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{:.1f}\"><title>{}: params fill {:.1f}% of {} shards, padding "
        "the rest</title></rect>\n",
        x0, top + kShardUse * (1 - s), std::max(x1 - x0, 0.5), kShardUse * s,
        first == last ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, last),
        100 * s, first == last ? "its" : "their");
    if (x1 - x0 >= 36) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\" text-anchor=\"middle\">"
          "{:.0f}%</text>\n",
          (x0 + x1) / 2, top + 12, 100 * s);
    }
    c = end;
  }
}

void BufferView::draw_axis(std::string& out, double top) const {
  if (buffer_.strategy == Strategy::unpadded || !buffer_.num_shards) {
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\">not sharded: every rank "
        "holds the whole buffer and its optimizer state</text>\n",
        kPlotLeft, top + 10);
    return;
  }
  // Labels at least ~40 px apart, on multiples of a column's ranks (powers of two).
  const double rank_width = kPlotWidth / static_cast<double>(shards_);
  std::int64_t step = ranks_per_column_;
  while (static_cast<double>(step) * rank_width < 40 && step < shards_) step *= 2;
  std::string ticks;
  const bool centred = ranks_per_column_ == 1 && step == 1;
  for (std::int64_t r = 0; r < shards_; r += step) {
    const double x = centred ? x_of_rank(r) + rank_width / 2 : x_of_rank(r);
    ticks += fmt::format("M{:.1f} {:.1f}v4", x, top);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\" text-anchor=\"{}\">{}</text>\n",
                       x, top + 14, centred ? "middle" : "start", r);
    if (r > shards_ - step) break;
  }
  if (!centred && static_cast<double>(shards_ - 1) * rank_width -
                          static_cast<double>((shards_ - 1) / step * step) * rank_width >=
                      40) {
    out +=
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\" text-anchor=\"end\">{}</text>\n",
                    kPlotLeft + kPlotWidth, top + 14, shards_ - 1);
  }
  out += fmt::format("<path class=\"grid\" d=\"{}\"/>\n", ticks);
  out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"s\">rank</text>\n", kMargin, top + 14);
}

double BufferView::draw(std::string& out, double y, std::size_t index, const Palette& palette,
                        double min_height, std::vector<bool>& used) const {
  const BufferLayout& b = buffer_;
  const std::int64_t params = b.param_numel().value_or(0);
  out += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" class=\"h\">buffer {}: {} ({}), {} params in {} bucket{} {}, "
      "{} elements, padding {:.2f}%</text>\n"
      "<text x=\"{}\" y=\"{:.1f}\" class=\"s\">per rank: params {}, grads {}{}</text>\n",
      kMargin, y + 14, index, escape(describe(b.key)), to_string(b.strategy), b.params.size(),
      b.buckets.size(), b.buckets.size() == 1 ? "" : "s",
      b.num_shards ? fmt::format("over {} rank{}", shards_, shards_ == 1 ? "" : "s")
                   : std::string("(not sharded)"),
      group_digits(b.numel), padding_share_percent(b.numel - params, params), kMargin, y + 30,
      human_bytes(static_cast<double>(param_buffer_bytes(b).value_or(0))),
      human_bytes(static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype)),
      ranks_per_column_ == 1 ? std::string()
                             : fmt::format("; each column is {} ranks", ranks_per_column_));
  const double top = y + kHeader;
  draw_bands(out, top);
  const auto mark = [&](Colour c) { used[static_cast<std::size_t>(c)] = true; };
  const auto x_of_column = [&](std::int64_t c) {
    return x_of_rank(std::min(shards_, column_first_rank(c)));
  };
  std::vector<Run> runs(static_cast<std::size_t>(columns_));
  for (Run& r : runs) r.height_by_colour.assign(palette.all().size(), 0.0);
  const auto flush = [&](std::int64_t c) {
    Run& r = runs[static_cast<std::size_t>(c)];
    if (r.empty()) return;
    const std::string what = r.params > 0
                                 ? fmt::format("{} small param{}, {} elements, mostly {}", r.params,
                                               r.params == 1 ? "" : "s", group_digits(r.elements),
                                               palette.label(r.colour()))
                                 : std::string("parts of params named in other boxes");
    out += fmt::format(
        "<rect class=\"m {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{:.1f}\"><title>{}</title></rect>\n",
        Palette::css_class(r.colour()), x_of_column(c), top + r.top,
        x_of_column(c + 1) - x_of_column(c), std::max(r.bottom - r.top, 1.0), what);
    mark(r.colour());
    r.clear();
  };
  for_each_piece([&](const Piece& p) {
    const ParamSlot& slot = b.params[p.param];
    const Colour colour = palette.colour_of(slot.name);
    if (p.height >= min_height) {
      out += fmt::format(
          "<rect class=\"p {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
          "height=\"{:.1f}\"><title>{} [{}, {}){}</title></rect>\n",
          Palette::css_class(colour), x_of_column(p.column), top + p.top,
          x_of_column(p.column + p.columns) - x_of_column(p.column), p.height,
          escape(excerpt(slot.name, 120)), slot.start, slot.end, p.first ? "" : " continued");
      mark(colour);
      return;
    }
    for (std::int64_t c = p.column; c < p.column + p.columns; ++c) {
      Run& r = runs[static_cast<std::size_t>(c)];
      if (!r.empty() && (p.top > r.bottom + kMergeGap || p.top + p.height > r.top + kMaxMerged)) {
        flush(c);
      }
      if (r.empty()) r.top = p.top;
      r.bottom = std::max(r.bottom, p.top + p.height);
      r.params += p.first && c == p.column ? 1 : 0;
      r.elements += c == p.column ? p.elements : 0;
      r.height_by_colour[static_cast<std::size_t>(colour)] += std::max(p.height, 1e-9);
    }
  });
  for (std::int64_t c = 0; c < columns_; ++c) flush(c);
  draw_grid(out, top);
  double bottom = top + plot_height_ + 6;
  if (b.strategy != Strategy::unpadded && b.num_shards) {
    draw_shard_use(out, bottom);
    bottom += kShardUse + 4;
  }
  draw_axis(out, bottom);
  return bottom + 24;
}

}  // namespace paramlayout::render
