// What every picture shares: the SVG document's start (size, hatching, styles, the white
// page) and the legend of the colours used.
#pragma once

#include <string>
#include <vector>

#include "palette.hpp"

namespace paramlayout::render {

/// The document up to the page's background, `height` pixels tall (kPageWidth wide), with
/// the palette's colour classes: close it with "</svg>\n".
std::string page_start(double height, const Palette& palette);

/// The legend at `y`: the padding's hatching, then each colour `used` marks (by index in
/// palette.all()). Returns the y below it.
double draw_legend(std::string& out, double y, const Palette& palette,
                   const std::vector<bool>& used);

}  // namespace paramlayout::render
