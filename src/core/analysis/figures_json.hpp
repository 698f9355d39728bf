// The figures every JSON output of paramlayout spells the same way: bytes per rank and the
// traffic per step (formats.md).
#pragma once

#include "format/json_writer.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// {"params": P, "grads": G, "optimizer": O}
void write_bytes_per_rank(json::Writer& w, const BytesPerRank& bytes);

/// "reduce_scatter_bytes": ..., "all_gather_bytes": ..., "all_reduce_bytes": ...,
/// "sent_bytes": ..., "padding_sent_bytes": ...: the members, without braces.
void write_traffic_members(json::Writer& w, const LayoutTraffic& traffic);

}  // namespace paramlayout
