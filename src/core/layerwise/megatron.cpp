#include "layerwise/megatron.hpp"

#include <algorithm>
#include <cmath>

#include "layerwise/shard_queues.hpp"

namespace paramlayout::layerwise {
namespace {

/// Packs the chunks of one buffer, one after another, into `out`.
class ChunkPacker {
 public:
  ChunkPacker(const BufferJob& job, const std::vector<Cost>& cost, Packing& out)
      : job_(job),
        cost_(cost),
        out_(out),
        dp_(job.group.num_shards),
        shard_divisor_(shard_divisor(dp_, job.options.pad_for_high_nccl_busbw)),
        loads_(dp_),
        cursors_(dp_) {}

  /// Packs `chunk` (positions in the job) as a bucket; reorders it.
  Result<void> pack(std::vector<std::size_t>& chunk, Wide chunk_numel) {
    if (chunk.empty()) return {};
    // Costliest first; ties in backprop order (descending position).
    std::sort(chunk.begin(), chunk.end(), [&](std::size_t a, std::size_t b) {
      return cost_[a] > cost_[b] || (cost_[a] == cost_[b] && a > b);
    });
    // Megatron-LM compares integers with this double cap exactly; so does its floor.
    const double cap = static_cast<double>(chunk_numel) / static_cast<double>(dp_) * (1.0 + 0.3);
    const Wide cap_floor = static_cast<Wide>(std::floor(cap));
    const std::size_t first = out_.next_bucket();
    Wide fullest = 0;
    for (const std::size_t k : chunk) {
      const std::int64_t numel = job_.param(k).numel;
      std::int32_t s = loads_.find(cap_floor - numel);
      if (s < 0) s = cursors_.find();
      const Wide cursor = cursors_.cursor(s);
      const Wide end = align_param_start(cursor) + numel;
      Cost load = 0;
      if (__builtin_add_overflow(loads_.load(s), cost_[k], &load)) {
        return Error{job_.manifest.source + ": the Newton-Schulz costs of buffer " +
                     describe(job_.group.key) + " add up to more than 127 bits"};
      }
      cursors_.set(s, end);
      loads_.set(s, load, align_param_start(end));
      fullest = std::max(fullest, end);
      out_.add(k, s);
    }
    for (std::size_t i = first; i < out_.slots.size(); ++i) {  // the next chunk starts empty
      const auto s = static_cast<std::int32_t>(out_.slots[i].shard);
      if (cursors_.cursor(s) == 0) continue;
      cursors_.set(s, 0);
      loads_.set_fill(s, 0);
    }
    out_.close_bucket(pad_to(fullest, Wide{shard_divisor_}), chunk_numel);
    return {};
  }

 private:
  const BufferJob& job_;
  const std::vector<Cost>& cost_;
  Packing& out_;
  const std::int64_t dp_;
  const std::int64_t shard_divisor_;
  LeastLoadedShard loads_;  ///< over the whole buffer; fills over the chunk
  EmptiestShard cursors_;   ///< over the chunk
};

}  // namespace

Result<Packing> pack_megatron(const BufferJob& job, const std::vector<Cost>& cost) {
  Packing out;
  ChunkPacker packer(job, cost, out);
  const std::int64_t dp = job.group.num_shards;
  const Wide divisor = shard_divisor(dp, job.options.pad_for_high_nccl_busbw);
  const std::optional<std::int64_t>& bucket_size = job.options.bucket_size;
  std::vector<std::size_t> chunk;
  Wide chunk_numel = 0;
  std::int64_t chunk_largest = 0;
  Wide threshold = 0;  // max(bucket_size, trunc(0.9 x dp x chunk_largest))
  FillEstimate estimate(dp);
  const auto close_chunk = [&]() -> Result<void> {
    Result<void> packed = packer.pack(chunk, chunk_numel);
    chunk.clear();
    chunk_numel = 0;
    chunk_largest = 0;
    estimate.reset();
    return packed;
  };
  for (std::size_t k = job.group.params.size(); k-- > 0;) {
    const Param& param = job.param(k);
    if (param.shared_embedding) {
      if (Result<void> r = close_chunk(); !r) return r.error();
      out.add(k, 0);
      out.close_bucket(shared_embedding_shard(job, k), param.numel);
      continue;
    }
    if (bucket_size && !chunk.empty()) {
      const bool absorbed = align_param_start(estimate.min()) + param.numel <=
                            pad_to(estimate.max(), divisor);
      if (chunk_numel >= threshold && !absorbed) {
        if (Result<void> r = close_chunk(); !r) return r.error();
      }
    }
    estimate.place(param.numel);
    chunk.push_back(k);
    chunk_numel += param.numel;
    if (param.numel > chunk_largest) {
      chunk_largest = param.numel;
      const Wide floor = static_cast<Wide>(
          std::trunc(static_cast<double>(Wide{dp} * chunk_largest) * 0.9));
      threshold = std::max(Wide{bucket_size.value_or(0)}, floor);
    }
  }
  if (Result<void> r = close_chunk(); !r) return r.error();
  return out;
}

}  // namespace paramlayout::layerwise
