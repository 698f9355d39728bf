#include "palette.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace paramlayout::render {
namespace {

constexpr std::int64_t kMaxSingleLayers = 12;
constexpr std::int64_t kMaxLayerRanges = 10;

/// The N of the first "layers.N." in a param name.
std::optional<std::int64_t> layer_of(std::string_view name) {
  const std::size_t at = name.find("layers.");
  if (at == std::string_view::npos) return std::nullopt;
  std::int64_t layer = 0;
  const char* begin = name.data() + at + 7;
  const char* end = name.data() + name.size();
  auto [stop, error] = std::from_chars(begin, end, layer);
  if (error != std::errc() || stop == begin || stop == end || *stop != '.' || layer < 0) {
    return std::nullopt;
  }
  return layer;
}

bool is_mtp(std::string_view name) { return name.starts_with("mtp."); }

}  // namespace

std::optional<std::int64_t> decoder_layer_of(std::string_view param_name) {
  return is_mtp(param_name) ? std::nullopt : layer_of(param_name);
}

namespace {

/// The first and last decoder layer named in `layout`'s params; {-1, -1} for none.
std::pair<std::int64_t, std::int64_t> layer_range(const Layout& layout) {
  std::int64_t first = -1;
  std::int64_t last = -1;
  for (const BufferLayout& b : layout.buffers) {
    for (const ParamSlot& p : b.params) {
      if (const std::optional<std::int64_t> layer = decoder_layer_of(p.name)) {
        first = first < 0 ? *layer : std::min(first, *layer);
        last = std::max(last, *layer);
      }
    }
  }
  return {first, last};
}

}  // namespace

Palette::Palette(const Layout& layout)
    : Palette(layer_range(layout).first, layer_range(layout).second) {}

Palette::Palette(std::int64_t first, std::int64_t last) {
  if (first < 0 || last < first) return;
  first_layer_ = first;
  last_layer_ = last;
  // last - first fits (both are >= 0); last - first + 1 might not.
  const std::int64_t spread = last - first;
  layers_per_colour_ = spread < kMaxSingleLayers ? 1 : spread / kMaxLayerRanges + 1;
  layer_colours_ = static_cast<int>(spread / layers_per_colour_ + 1);
}

Colour Palette::colour_of_layer(std::int64_t layer) const {
  if (layer_colours_ == 0) return layer_colours_ + kRest;
  const std::int64_t at = std::clamp(layer, first_layer_, last_layer_);
  return static_cast<Colour>((at - first_layer_) / layers_per_colour_);
}

Colour Palette::colour_of(std::string_view name) const {
  if (is_mtp(name)) return layer_colours_ + kMtp;
  if (const std::optional<std::int64_t> layer = layer_of(name); layer && layer_colours_ > 0) {
    return static_cast<Colour>((*layer - first_layer_) / layers_per_colour_);
  }
  if (name.find("embedding") != std::string_view::npos) return layer_colours_ + kEmbedding;
  if (name.find("output_layer") != std::string_view::npos) return layer_colours_ + kOutput;
  return layer_colours_ + kRest;
}

std::string Palette::css_class(Colour colour) { return fmt::format("c{}", colour); }

std::string Palette::css() const {
  std::string out;
  for (int i = 0; i < layer_colours_; ++i) {
    // Blue through green and yellow to red, in layer order.
    const int hue = layer_colours_ == 1 ? 210 : 240 - 240 * i / (layer_colours_ - 1);
    out += fmt::format(".c{}{{fill:hsl({},62%,{}%)}}", i, hue, hue > 40 && hue < 80 ? 45 : 55);
  }
  static constexpr const char* kOtherFill[kOthers] = {"#8c564b", "#e377c2", "#9467bd", "#bdbdbd"};
  for (int i = 0; i < kOthers; ++i) {
    out += fmt::format(".c{}{{fill:{}}}", layer_colours_ + i, kOtherFill[i]);
  }
  return out;
}

std::string Palette::label(Colour colour) const {
  if (colour < layer_colours_) {
    const std::int64_t from = first_layer_ + colour * layers_per_colour_;
    const std::int64_t to =
        last_layer_ - from < layers_per_colour_ - 1 ? last_layer_ : from + layers_per_colour_ - 1;
    return from == to ? fmt::format("layer {}", from) : fmt::format("layers {}-{}", from, to);
  }
  switch (colour - layer_colours_) {
    case kEmbedding:
      return "embedding";
    case kOutput:
      return "output layer";
    case kMtp:
      return "multi-token prediction";
    default:
      return "not in a layer";
  }
}

std::vector<Colour> Palette::all() const {
  std::vector<Colour> out;
  for (int i = 0; i < layer_colours_ + kOthers; ++i) out.push_back(i);
  return out;
}

}  // namespace paramlayout::render
