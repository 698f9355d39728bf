// render: a layout as an SVG picture. Each buffer is its buckets (rows) by shards (columns,
// one per rank), params as boxes coloured by layer, padding hatched, with a legend and the
// memory per rank.
#pragma once

#include <string>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"

namespace paramlayout {

/// The picture as SVG text. Boxes under a pixel tall are merged, per bucket and shard, into
/// one box that says how many params it holds, so 30k-param layouts stay readable and small;
/// a param is at most three boxes, whatever the shard count. Fails when the layout breaks a
/// promise of check_structure.
Result<std::string> render_svg(const Layout& layout);

}  // namespace paramlayout
