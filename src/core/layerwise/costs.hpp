// Newton-Schulz costs of a buffer's params and of its ranks (paramlayout/costs.hpp), as the
// layerwise packers weigh them.
#pragma once

#include <vector>

#include "paramlayout/costs.hpp"
#include "strategies/buffer_builder.hpp"

namespace paramlayout::layerwise {

using strategies::BufferJob;
using strategies::Wide;

/// Every param's Newton-Schulz cost, by position in the job; an error naming the first
/// param whose cost does not fit in 127 bits.
Result<std::vector<Cost>> newton_schulz_costs(const BufferJob& job);

/// The largest of `costs` (0 when empty).
Cost heaviest(const std::vector<Cost>& costs);

/// Adds `costs` into `total` rank by rank, saturating; `total` grows to their size.
void add_rank_costs(std::vector<Cost>& total, const std::vector<Cost>& costs);

}  // namespace paramlayout::layerwise
