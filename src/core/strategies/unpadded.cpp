// docs/strategies.md, Unpadded packing: plain DDP, no padding.
#include "strategies.hpp"

namespace paramlayout::strategies {

void lay_out_unpadded(const BufferJob& job, BufferBuilder& out) {
  const std::optional<std::int64_t>& bucket_size = job.options.bucket_size;
  Wide cursor = 0;
  Wide bucket_start = 0;
  std::int64_t bucket = 0;
  bool open = false;
  for (std::size_t k = job.group.params.size(); k-- > 0;) {
    out.place(job, k, cursor, bucket);
    cursor += job.param(k).numel;
    open = true;
    if (bucket_size && cursor - bucket_start >= *bucket_size) {
      out.add_bucket(bucket_start, cursor, cursor - bucket_start);
      bucket_start = cursor;
      ++bucket;
      open = false;
    }
  }
  if (open) out.add_bucket(bucket_start, cursor, cursor - bucket_start);
}

}  // namespace paramlayout::strategies
