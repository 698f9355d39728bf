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

/// The chunk being formed, in backprop order: it closes once it reaches max(bucket_size,
/// 0.9 x dp x its largest param) and the next param would not fit in the shards it already
/// needs, estimated by putting each param on the least-filled shard.
class Chunk {
 public:
  explicit Chunk(const BufferJob& job)
      : dp_(job.group.num_shards),
        divisor_(shard_divisor(dp_, job.options.pad_for_high_nccl_busbw)),
        bucket_size_(job.options.bucket_size),
        estimate_(dp_) {}

  std::vector<std::size_t> params;  ///< positions in the job
  Wide numel = 0;

  /// Whether the chunk closes before a param of `numel` elements joins it.
  bool closes_before(std::int64_t numel) const {
    if (!bucket_size_ || params.empty() || this->numel < threshold_) return false;
    return align_param_start(estimate_.min()) + numel > pad_to(estimate_.max(), divisor_);
  }

  void add(std::size_t k, std::int64_t param_numel) {
    estimate_.place(param_numel);
    params.push_back(k);
    numel += param_numel;
    if (param_numel > largest_) {
      largest_ = param_numel;
      const Wide floor =
          static_cast<Wide>(std::trunc(static_cast<double>(Wide{dp_} * largest_) * 0.9));
      threshold_ = std::max(Wide{bucket_size_.value_or(0)}, floor);
    }
  }

  void clear() {
    params.clear();
    numel = 0;
    largest_ = 0;
    estimate_.reset();
  }

 private:
  std::int64_t dp_;
  Wide divisor_;
  std::optional<std::int64_t> bucket_size_;
  std::int64_t largest_ = 0;
  Wide threshold_ = 0;  ///< max(bucket_size, trunc(0.9 x dp x largest))
  FillEstimate estimate_;
};

}  // namespace

Result<Packing> pack_megatron(const BufferJob& job, const std::vector<Cost>& cost) {
  Packing out;
  ChunkPacker packer(job, cost, out);
  Chunk chunk(job);
  const auto close = [&]() -> Result<void> {
    Result<void> packed = packer.pack(chunk.params, chunk.numel);
    chunk.clear();
    return packed;
  };
  for (std::size_t k = job.group.params.size(); k-- > 0;) {
    const Param& param = job.param(k);
    if (param.shared_embedding) {
      if (Result<void> r = close(); !r) return r.error();
      out.add(k, 0);
      out.close_bucket(shared_embedding_shard(job, k), param.numel);
      continue;
    }
    if (chunk.closes_before(param.numel)) {
      if (Result<void> r = close(); !r) return r.error();
    }
    chunk.add(k, param.numel);
  }
  if (Result<void> r = close(); !r) return r.error();
  return out;
}

}  // namespace paramlayout::layerwise
