#include "paramlayout/render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "paramlayout/check.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout {
namespace {

constexpr double kWidth = 1200;
constexpr double kMargin = 20;
constexpr double kBufferHeight = 360;  ///< all of a buffer's bucket rows together
constexpr double kMinRow = 14;
constexpr double kMinBox = 1.0;        ///< boxes less tall than this are merged

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        // XML has no way to write most control characters, even escaped.
        out += static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' ? '?' : c;
    }
  }
  return out;
}

/// The N of "layers.N." in a param name.
std::optional<std::int64_t> layer_of(std::string_view name) {
  const std::size_t at = name.find("layers.");
  if (at == std::string_view::npos) return std::nullopt;
  std::int64_t layer = 0;
  const char* begin = name.data() + at + 7;
  auto [end, error] = std::from_chars(begin, name.data() + name.size(), layer);
  if (error != std::errc() || end == begin) return std::nullopt;
  return layer;
}

std::string colour_of(std::string_view name) {
  const std::optional<std::int64_t> layer = layer_of(name);
  if (!layer) return "#8a9bb0";
  return fmt::format("hsl({},62%,{}%)", *layer % 360 * 47 % 360, 52 + (*layer % 3) * 8);
}

/// Boxes merged in one bucket and shard: their vertical extent and how many params.
struct Merged {
  double top = 0;
  double bottom = 0;
  int params = 0;
  std::string colour;
};

}  // namespace

Result<std::string> render_svg(const Layout& layout) {
  if (Result<void> valid = validate_structure(layout); !valid) return valid.error();
  std::string body;
  double y = kMargin + 30;
  const double plot_width = kWidth - 2 * kMargin - 60;
  std::int64_t max_layer = -1;
  for (std::size_t bi = 0; bi < layout.buffers.size(); ++bi) {
    const BufferLayout& b = layout.buffers[bi];
    const std::int64_t shards = b.num_shards.value_or(1);
    const std::int64_t padding = b.numel - b.param_numel().value_or(0);
    const double param_bytes = static_cast<double>(b.numel) * dtype_bytes(b.key.param_dtype);
    const double grad_bytes = static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype);
    body += fmt::format(
        "<text x=\"{}\" y=\"{}\" class=\"h\">buffer {}: {} ({}), {} params, {} buckets x {} "
        "shards, {} elements, padding {:.2f}%, per rank: params {}, grads {}</text>\n",
        kMargin, y, bi, escape(describe(b.key)), to_string(b.strategy), b.params.size(),
        b.buckets.size(), shards, group_digits(b.numel),
        b.numel > 0 ? 100.0 * static_cast<double>(padding) / static_cast<double>(b.numel) : 0.0,
        human_bytes(param_bytes), human_bytes(grad_bytes));
    y += 10;
    const double column = plot_width / static_cast<double>(shards);
    std::vector<double> row_top(b.buckets.size());
    std::vector<double> row_height(b.buckets.size());
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const double share = b.numel > 0 ? static_cast<double>(b.buckets[j].size()) /
                                             static_cast<double>(b.numel)
                                       : 0;
      row_top[j] = y;
      row_height[j] = std::max(kMinRow, share * kBufferHeight);
      body += fmt::format(
          "<text x=\"{}\" y=\"{:.1f}\" class=\"s\">bucket {}</text>\n<rect x=\"{}\" "
          "y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"url(#pad)\" "
          "stroke=\"#444\" stroke-width=\"0.5\"><title>bucket {}: [{}, {}), {} of padding</title></rect>\n",
          kMargin, y + 10, j, kMargin + 60, y, plot_width, row_height[j], j,
          b.buckets[j].start, b.buckets[j].end,
          group_digits(b.buckets[j].size() - b.buckets[j].numel_unpadded));
      y += row_height[j] + 2;
    }
    // Boxes too small to see, by (bucket, shard): only where a param ends, so at most two
    // per param, whatever the shard count.
    std::map<std::pair<std::size_t, std::int64_t>, Merged> merged;
    for (const ParamSlot& p : b.params) {
      if (const std::optional<std::int64_t> layer = layer_of(p.name)) {
        max_layer = std::max(max_layer, *layer);
      }
      const auto j = static_cast<std::size_t>(p.bucket);
      const BucketRange& bucket = b.buckets[j];
      const std::int64_t shard_size = bucket.size() / shards;
      const double scale = row_height[j] / static_cast<double>(shard_size);
      const std::string colour = colour_of(p.name);
      const std::string title = escape(fmt::format("{} [{}, {})", p.name, p.start, p.end));
      // Elements [from, to) of shard s, drawn across `count` shards' columns.
      const auto box = [&](std::int64_t s, std::int64_t count, std::int64_t from, std::int64_t to) {
        const std::int64_t shard_start = bucket.start + s * shard_size;
        const double top = row_top[j] + static_cast<double>(from - shard_start) * scale;
        const double height = static_cast<double>(to - from) * scale;
        if (height < kMinBox) {
          Merged& m = merged[{j, s}];
          if (m.params == 0) {
            m.top = top;
            m.colour = colour;
          }
          m.bottom = std::max(m.bottom, top + height);
          ++m.params;
          return;
        }
        body += fmt::format(
            "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
            "stroke=\"#222\" stroke-width=\"0.3\"><title>{}</title></rect>\n",
            kMargin + 60 + static_cast<double>(s) * column, top,
            std::max(column * static_cast<double>(count), 0.5), height, colour, title);
      };
      // A param ends its first shard, fills the shards between (one box: they look alike)
      // and starts its last.
      const std::int64_t first = (p.start - bucket.start) / shard_size;
      const std::int64_t last = (p.end - 1 - bucket.start) / shard_size;
      const std::int64_t first_end = bucket.start + (first + 1) * shard_size;
      box(first, 1, p.start, std::min(p.end, first_end));
      if (last > first + 1) box(first + 1, last - first - 1, first_end, first_end + shard_size);
      if (last > first) box(last, 1, bucket.start + last * shard_size, p.end);
    }
    for (const auto& [cell, m] : merged) {
      body += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
          "stroke=\"none\"><title>{} small params</title></rect>\n",
          kMargin + 60 + static_cast<double>(cell.second) * column, m.top, std::max(column, 0.5),
          std::max(m.bottom - m.top, kMinBox), m.colour, m.params);
    }
    y += 28;
  }

  // Legend: padding, params outside layers, and a few layer colours.
  std::string legend = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"url(#pad)\" stroke=\"#444\"/>"
      "<text x=\"{}\" y=\"{}\" class=\"s\">padding</text>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
      "<text x=\"{}\" y=\"{}\" class=\"s\">not in a layer</text>\n",
      kMargin, y, kMargin + 20, y + 11, kMargin + 100, y, colour_of(""), kMargin + 120, y + 11);
  const std::int64_t shown = max_layer < 12 ? max_layer + 1 : 12;
  for (std::int64_t i = 0; i < shown; ++i) {
    // i * max_layer / 11, which fits whatever the layer numbers.
    const std::int64_t layer =
        max_layer < 12 ? i : i * (max_layer / 11) + i * (max_layer % 11) / 11;
    const double x = kMargin + 240 + static_cast<double>(i) * 78;
    legend += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" class=\"s\">layer {}</text>\n",
        x, y, colour_of(fmt::format("layers.{}.", layer)), x + 18, y + 11, layer);
  }
  y += 30;

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {} {:.0f}\" font-family=\"sans-serif\">\n"
      "<defs><pattern id=\"pad\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbb\" stroke-width=\"2\"/>"
      "</pattern><style>.t{{font-size:16px;font-weight:bold}} .h{{font-size:12px}} "
      ".s{{font-size:10px;fill:#333}}</style></defs>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"{}\" class=\"t\">{}: {}, dp {}{}</text>\n",
      kWidth, y, kWidth, y, kMargin, kMargin + 8, escape(layout.model.value_or("layout")),
      to_string(layout.options.strategy), layout.options.dp,
      layout.options.strategy == Strategy::layerwise
          ? fmt::format(", {} packer", to_string(layout.options.packer))
          : std::string());
  svg += body;
  svg += legend;
  svg += "</svg>\n";
  return svg;
}

}  // namespace paramlayout
