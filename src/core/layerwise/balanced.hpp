// The balanced packer: the promises of Megatron-LM's layerwise layout (every param whole in
// one shard, buckets contiguous in backprop order, sizes divisible as required) with less
// padding than Megatron-LM's greedy packer.
//
// A bucket is dp bins of one capacity. Each run of params between shared embeddings is cut
// into buckets (cuts.hpp); each bucket gets about the smallest capacity at which its params
// pack (capacity.hpp), and at that capacity its params are packed by Newton-Schulz cost
// where they fit (assign.hpp). Bins then become shards costliest first onto the
// least-loaded ranks, loads counted across the buckets and the buffers of the same ranks
// planned before, and swaps within a bucket lighten the heaviest rank.
#pragma once

#include <optional>
#include <vector>

#include "layerwise/packing.hpp"

namespace paramlayout::layerwise {

/// Packs `job`'s buffer (params' costs `cost`, by position in the job) in at most `limit`
/// elements, its heaviest rank's cost at most `target` counting `load` (each rank's cost
/// from the buffers of these ranks planned before); nothing where it finds no such packing,
/// or where the buffer is too large to plan in 64 bits (2^60 / dp elements: no real
/// buffer). `search`: fill bins one at a time and move cuts (tighter, but blind to cost).
std::optional<Packing> pack_balanced(const BufferJob& job, const std::vector<Cost>& cost,
                                     Wide limit, std::vector<Cost> load, Cost target, bool search);

}  // namespace paramlayout::layerwise
