#include "buffer_builder.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace paramlayout::strategies {

BufferBuilder::BufferBuilder(const BufferJob& job, BufferLayout& out) : job_(job), out_(out) {
  out_.buckets.clear();
  out_.params.clear();
  out_.params.reserve(job.group.params.size());
  out_.numel = out_.numel_unpadded = 0;
}

void BufferBuilder::place(std::size_t k, Wide start, std::int64_t bucket) {
  const Wide end = start + job_.param(k).numel;
  max_offset_ = std::max(max_offset_, end);
  out_.params.push_back({job_.param(k).name, static_cast<std::int64_t>(start),
                         static_cast<std::int64_t>(end), bucket, job_.group.indices[k]});
}

void BufferBuilder::add_bucket(Wide start, Wide end, Wide numel_unpadded) {
  max_offset_ = std::max(max_offset_, end);
  out_.buckets.push_back({static_cast<std::int64_t>(start), static_cast<std::int64_t>(end),
                          static_cast<std::int64_t>(numel_unpadded)});
}

Result<void> BufferBuilder::finish() {
  if (max_offset_ > INT64_MAX) {
    return Error{fmt::format(
        "{}: buffer {} would need {} elements; offsets must fit in 64 bits (at most {})",
        job_.manifest.source, describe(job_.group.key), static_cast<double>(max_offset_),
        INT64_MAX)};
  }
  out_.numel = out_.buckets.empty() ? 0 : out_.buckets.back().end;
  for (const BucketRange& b : out_.buckets) out_.numel_unpadded += b.numel_unpadded;
  return {};
}

}  // namespace paramlayout::strategies
