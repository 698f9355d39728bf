// docs/strategies.md, Sequential-dp packing: Megatron's DistributedOptimizer layout.
#include "strategies.hpp"

namespace paramlayout::strategies {

void lay_out_sequential_dp(const BufferJob& job, BufferBuilder& out) {
  const std::optional<std::int64_t>& bucket_size = job.options.bucket_size;
  const Wide divisor = bucket_divisor(job.group.num_shards, job.options.pad_for_high_nccl_busbw);
  Wide start = 0;
  Wide end = 0;
  Wide bucket_start = 0;
  std::int64_t bucket = 0;
  bool open = false;
  auto close_bucket = [&](Wide at) {
    const Wide padded_end = pad_to(at, divisor);
    out.add_bucket(bucket_start, padded_end, at - bucket_start);
    bucket_start = padded_end;
    ++bucket;
    open = false;
  };
  for (std::size_t k = job.group.params.size(); k-- > 0;) {
    const Param& param = job.param(k);
    start = align_param_start(start);
    if (param.shared_embedding && open) {
      close_bucket(start);
      start = bucket_start;
    }
    end = start + param.numel;
    out.place(job, k, start, bucket);
    open = true;
    if ((bucket_size && end - bucket_start >= *bucket_size) || param.shared_embedding) {
      close_bucket(end);
      start = bucket_start;
    } else {
      start = end;
    }
  }
  if (open) close_bucket(end);
}

}  // namespace paramlayout::strategies
