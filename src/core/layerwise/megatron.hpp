// Megatron-LM's packing of a layerwise buffer (its layer-wise distributed optimizer), bit
// for bit: params in backprop order are cut into chunks, each closed once it reaches
// max(bucket_size, 0.9 x dp x its largest param) and no shard could take the next param
// within the shard size reached; each chunk's params, costliest first, go to the
// least-loaded shard with room under 1.3 x the chunk's mean (else the emptiest), loads kept
// across the buffer's chunks; a shared embedding gets a bucket of its own, in shard 0.
#pragma once

#include <vector>

#include "layerwise/packing.hpp"

namespace paramlayout::layerwise {

/// Packs `job`'s buffer given every param's cost (newton_schulz_costs); fails only where a
/// shard's costs add up to more than 127 bits.
Result<Packing> pack_megatron(const BufferJob& job, const std::vector<Cost>& cost);

}  // namespace paramlayout::layerwise
