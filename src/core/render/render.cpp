#include "paramlayout/render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "buffer_view.hpp"
#include "page.hpp"
#include "palette.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/stats.hpp"
#include "paramlayout/text.hpp"
#include "svg.hpp"

namespace paramlayout {
namespace {

using render::BufferView;
using render::Colour;
using render::escape;
using render::kMargin;
using render::kPageWidth;
using render::kPlotLeft;
using render::kPlotWidth;
using render::Palette;
using render::Piece;

constexpr double kMinBox = 3;            ///< pieces less tall than this merge
constexpr std::size_t kMaxBoxes = 5000;  ///< named boxes in a picture, at most

/// The least height a piece needs to be drawn as a box of its own: kMinBox, or more where
/// that would draw more than kMaxBoxes boxes (which bounds the picture's size).
double box_threshold(const std::vector<BufferView>& views) {
  std::vector<double> heights;
  for (const BufferView& v : views) {
    v.for_each_piece([&](const Piece& p) {
      if (p.height >= kMinBox) heights.push_back(p.height);
    });
  }
  if (heights.size() <= kMaxBoxes) return kMinBox;
  std::nth_element(heights.begin(), heights.begin() + kMaxBoxes - 1, heights.end(),
                   std::greater<>());
  // Strictly above the kMaxBoxes-th largest: ties are merged rather than counted.
  return std::nextafter(heights[kMaxBoxes - 1], INFINITY);
}

/// One bar of what every rank holds: params, grads and optimizer state, padding hatched.
double draw_memory(std::string& out, double y, const Layout& layout, const LayoutStats& s) {
  double param_padding = 0;
  double grad_padding = 0;
  double optimizer_padding = 0;
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    const BufferLayout& b = layout.buffers[i];
    const double padding = static_cast<double>(s.buffers[i].padding);
    // The param buffer's padding: none in the grad buffer (mxfp8), its own when packed.
    const ParamBufferLayout& p = b.param_buffer;
    if (p.packed && !p.in_grad_buffer) {
      double packed_padding = static_cast<double>(p.numel);
      for (const ParamSlot& slot : p.params) packed_padding -= static_cast<double>(slot.numel());
      param_padding += packed_padding * dtype_bytes(b.key.param_dtype);
    } else if (!p.in_grad_buffer) {
      param_padding += padding * dtype_bytes(b.key.param_dtype);
    }
    grad_padding += padding * dtype_bytes(b.key.grad_dtype);
    // A rank's share of the padding, on average over the ranks.
    optimizer_padding += padding / static_cast<double>(b.num_shards.value_or(1)) *
                         optimizer_state(b.key).bytes_per_element();
  }
  const BytesPerRank& bytes = s.bytes_per_rank;
  const double total = static_cast<double>(bytes.total());
  out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"h\">per rank</text>\n", kMargin, y + 13);
  double x = kPlotLeft;
  const struct {
    const char* css;
    const char* name;
    double bytes;
    double padding;
  } parts[] = {{"mp", "params", static_cast<double>(bytes.params), param_padding},
               {"mg", "grads", static_cast<double>(bytes.grads), grad_padding},
               {"mo", "optimizer state", static_cast<double>(bytes.optimizer), optimizer_padding}};
  std::vector<std::string> labels;
  for (const auto& part : parts) {
    const double width = total > 0 ? kPlotWidth * part.bytes / total : 0;
    const double hatched = part.bytes > 0 ? width * std::min(part.padding / part.bytes, 1.0) : 0;
    const std::string label =
        fmt::format("{} {} ({:.1f}% padding)", part.name, human_bytes(part.bytes),
                    part.bytes > 0 ? 100 * part.padding / part.bytes : 0.0);
    out += fmt::format(
        "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"18\"><title>{}</title></rect>\n",
        part.css, x, y, width - hatched, label);
    if (hatched > 0) {
      out += fmt::format(
          "<rect class=\"pad\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
          "height=\"18\"><title>{} padding</title></rect>\n",
          x + width - hatched, y, hatched, part.name);
    }
    x += width;
    labels.push_back(label);
  }
  out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"s\">{}; total {} on every rank</text>\n",
                     kPlotLeft, y + 32, fmt::join(labels, ", "), human_bytes(total));
  return y + 44;
}

}  // namespace

Result<std::string> render_svg(const Layout& layout) {
  if (Result<void> valid = validate_structure(layout); !valid) return valid.error();
  // The manifest only gives the Newton-Schulz costs, which the picture does not show. Figures
  // past 64 bits leave out the lines that need them.
  const Result<LayoutStats> stats = layout_stats(layout, Manifest{});
  const Palette palette(layout);
  std::vector<BufferView> views;
  for (const BufferLayout& b : layout.buffers) views.emplace_back(b);
  const double min_height = box_threshold(views);

  std::vector<bool> used(palette.all().size(), false);
  std::string body;
  double y = 64;
  for (std::size_t i = 0; i < views.size(); ++i) {
    y = views[i].draw(body, y, i, palette, min_height, used);
  }
  y = render::draw_legend(body, y + 4, palette, used);
  if (stats) y = draw_memory(body, y, layout, *stats);

  const PlanOptions& o = layout.options;
  std::string title =
      fmt::format("{}: {}, dp {}", escape(excerpt(layout.model.value_or("layout"), 80)),
                  to_string(o.strategy), o.dp);
  if (o.expert_dp != o.dp) title += fmt::format(", expert dp {}", o.expert_dp);
  if (o.strategy == Strategy::layerwise) title += fmt::format(", {} packer", to_string(o.packer));
  std::string svg = render::page_start(y + 8, palette);
  svg += fmt::format(
      "<text x=\"{0}\" y=\"28\" class=\"t\">{1}</text>\n"
      "<text x=\"{0}\" y=\"46\" class=\"s\">{2}hover a box for its param and range</text>\n",
      kMargin, title,
      stats ? fmt::format("padding {:.2f}% of the buffers; each rank sends {} per step ({:.2f}% "
                          "padding); ",
                          stats->padding_percent(),
                          human_bytes(static_cast<double>(stats->traffic.sent_bytes)),
                          stats->traffic.padding_percent())
            : std::string());
  svg += body;
  svg += "</svg>\n";
  return svg;
}

}  // namespace paramlayout
