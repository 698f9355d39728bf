#include "layerwise/packing.hpp"

#include <algorithm>

namespace paramlayout::layerwise {

void Packing::close_bucket(Wide shard_size, Wide numel_unpadded) {
  const std::size_t first = next_bucket();
  std::stable_sort(slots.begin() + static_cast<std::ptrdiff_t>(first), slots.end(),
                   [](const Slot& a, const Slot& b) { return a.shard < b.shard; });
  buckets.push_back({shard_size, numel_unpadded, first, slots.size()});
}

Wide Packing::size(std::int64_t shards) const {
  Wide size = 0;
  for (const Bucket& b : buckets) size += shards * b.shard_size;
  return size;
}

Wide shared_embedding_shard(const BufferJob& job, std::size_t k) {
  const std::int64_t divisor =
      shard_divisor(job.group.num_shards, job.options.pad_for_high_nccl_busbw);
  return pad_to(Wide{job.param(k).numel}, Wide{divisor});
}

void write(const BufferJob& job, const Packing& packing, BufferBuilder& out) {
  Wide start = 0;
  for (std::size_t b = 0; b < packing.buckets.size(); ++b) {
    const Packing::Bucket& bucket = packing.buckets[b];
    std::int64_t shard = -1;
    Wide at = 0;
    for (std::size_t i = bucket.first; i < bucket.end; ++i) {
      const Packing::Slot& slot = packing.slots[i];
      if (slot.shard != shard) {
        shard = slot.shard;
        at = start + shard * bucket.shard_size;
      }
      out.place(slot.param, at, static_cast<std::int64_t>(b));
      at = align_param_start(at + job.param(slot.param).numel);
    }
    const Wide end = start + job.group.num_shards * bucket.shard_size;
    out.add_bucket(start, end, bucket.numel_unpadded);
    start = end;
  }
}

std::vector<Cost> slot_costs(const Packing& packing, const std::vector<Cost>& cost) {
  std::vector<Cost> out;
  out.reserve(packing.slots.size());
  for (const Packing::Slot& slot : packing.slots) out.push_back(cost[slot.param]);
  return out;
}

}  // namespace paramlayout::layerwise
