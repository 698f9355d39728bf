// The colours of a layout's picture: params grouped by what they belong to (a range of
// decoder layers, the embedding, the output layer, the multi-token prediction layers, the
// rest), one colour per group, each named in the legend.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/layout.hpp"

namespace paramlayout::render {

/// A colour group's index, from 0.
using Colour = int;

/// The decoder layer a param belongs to: the N of the first "layers.N." in its name, for
/// params outside the multi-token prediction layers; nullopt for the others.
std::optional<std::int64_t> decoder_layer_of(std::string_view param_name);

class Palette {
 public:
  /// Groups for the params of `layout`: at most 12 decoder layers one colour each, more
  /// in at most 10 ranges of consecutive layers.
  explicit Palette(const Layout& layout);
  /// Groups for the decoder layers `first_layer` to `last_layer` (a job's, numbered across
  /// its chunks), as many as the layout constructor makes; `last_layer` < 0: no layers.
  Palette(std::int64_t first_layer, std::int64_t last_layer);

  Colour colour_of(std::string_view param_name) const;
  /// The colour of decoder layer `layer`, one of the palette's layers.
  Colour colour_of_layer(std::int64_t layer) const;

  /// CSS rules `.cN{fill:...}` for every group.
  std::string css() const;
  /// The class attribute value of a colour ("c3").
  static std::string css_class(Colour colour);
  /// What a colour stands for, for the legend ("layers 0-6", "embedding", ...).
  std::string label(Colour colour) const;
  /// Every colour, in legend order (layer ranges first).
  std::vector<Colour> all() const;

 private:
  std::int64_t first_layer_ = 0;
  std::int64_t last_layer_ = 0;
  std::int64_t layers_per_colour_ = 1;
  int layer_colours_ = 0;
  // The groups after the layer ranges.
  enum Other : int { kEmbedding, kOutput, kMtp, kRest, kOthers };
};

}  // namespace paramlayout::render
