// A packed layerwise buffer: which shard of which bucket each param goes to, before any
// offset is written. Both packers make one; the chooser weighs them and writes the one kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "layerwise/costs.hpp"
#include "strategies/buffer_builder.hpp"

namespace paramlayout::layerwise {

using strategies::BufferBuilder;

struct Packing {
  /// One param in one shard.
  struct Slot {
    std::size_t param;   ///< position in the job
    std::int64_t shard;  ///< of its bucket, from 0
  };
  /// dp shards of `shard_size` elements holding slots [first, end).
  struct Bucket {
    Wide shard_size;
    Wide numel_unpadded;  ///< its params' elements
    std::size_t first;
    std::size_t end;
  };
  std::vector<Bucket> buckets;  ///< in backprop order, each starting where the last ends
  /// Bucket by bucket, shard by shard, each shard's params from its start: layout order.
  std::vector<Slot> slots;

  /// Puts param `param` in shard `shard` of the next bucket, after the params put there
  /// before.
  void add(std::size_t param, std::int64_t shard) { slots.push_back({param, shard}); }
  /// Closes the next bucket: dp shards of `shard_size` holding the params added since the
  /// last one closed.
  void close_bucket(Wide shard_size, Wide numel_unpadded);
  /// Where the next bucket's slots begin.
  std::size_t next_bucket() const { return buckets.empty() ? 0 : buckets.back().end; }
  /// The buffer's size in elements, with `shards` shards per bucket.
  Wide size(std::int64_t shards) const;
};

/// Each shard's size in a bucket of a shared embedding alone: the param padded to the
/// shard divisor.
Wide shared_embedding_shard(const BufferJob& job, std::size_t k);

/// Writes `packing` of `job`'s buffer: each shard's params one after another from the
/// shard's start, each starting on a multiple of 64 elements.
void write(const BufferJob& job, const Packing& packing, BufferBuilder& out);

/// Each param's cost in `packing`'s layout order: what rank_costs weighs its layout by.
std::vector<Cost> slot_costs(const Packing& packing, const std::vector<Cost>& cost);

}  // namespace paramlayout::layerwise
