// render: a layout as an SVG picture. Each buffer is its buckets (rows) by shards (columns,
// one per rank), params as boxes coloured by layer, padding hatched, with a legend and the
// memory per rank.
#pragma once

#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/job_stats.hpp"
#include "paramlayout/layout.hpp"

namespace paramlayout {

/// The picture as SVG text. Boxes under a pixel tall are merged, per bucket and shard, into
/// one box that says how many params it holds, so 30k-param layouts stay readable and small;
/// a param is at most three boxes, whatever the shard count. Fails when the layout breaks a
/// promise of check_structure.
Result<std::string> render_svg(const Layout& layout);

/// One picture of a whole job, a row per pipeline stage. Above, each chunk's buffers whole,
/// as every rank of the stage keeps them, end to end at one scale of elements for the job
/// (the stage with the most fills the width): params as boxes coloured by layer, a box per
/// layer or group (narrower ones merged, so the picture stays small at any size), padding
/// hatched, bucket boundaries as lines. Below, the stage's memory per rank as a bar of
/// params, grads and optimizer state at the heaviest stage's scale. `layouts` are the
/// chunks' as record.chunks lists them; `stats` gives their bytes per rank and traffic.
/// Fails when a layout breaks a promise of check_structure (naming the chunk).
Result<std::string> render_job_svg(const JobRecord& record, const JobStats& stats,
                                   const std::vector<const Layout*>& layouts);

}  // namespace paramlayout
