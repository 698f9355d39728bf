#include "layerwise/balanced.hpp"

#include <algorithm>
#include <limits>

#include "layerwise/assign.hpp"
#include "layerwise/cuts.hpp"

namespace paramlayout::layerwise {
namespace {

/// A buffer's params as the balanced packer sees them: by position in backprop order
/// (position q is param n - 1 - q of the job).
struct Positions {
  std::vector<Size> span;    ///< aligned numel; a shared embedding, its whole bucket
  std::vector<Size> before;  ///< the spans before each position, in all
  std::vector<Cost> cost;
  std::vector<bool> shared_embedding;

  std::size_t size() const { return span.size(); }
};

/// The positions of `job`'s buffer; nothing where they add up to more than `size_limit`.
std::optional<Positions> positions_of(const BufferJob& job, const std::vector<Cost>& cost,
                                      Shards shards, Wide size_limit) {
  Positions p;
  const std::size_t n = job.group.params.size();
  p.before.push_back(0);
  Wide total = 0;
  for (std::size_t k = n; k-- > 0;) {
    const Param& param = job.param(k);
    const Wide span = param.shared_embedding ? shards.count * shared_embedding_shard(job, k)
                                             : align_param_start(Wide{param.numel});
    total += span;
    if (total > size_limit) return std::nullopt;
    p.span.push_back(static_cast<Size>(span));
    p.before.push_back(static_cast<Size>(total));
    p.cost.push_back(cost[k]);
    p.shared_embedding.push_back(param.shared_embedding);
  }
  return p;
}

/// Every bucket of the buffer, run by run, in at most `limit` elements; nothing where they
/// do not fit.
std::optional<Buckets> cut_runs(const BufferJob& job, const Positions& p, Shards shards, Size limit,
                                bool search) {
  Capacities capacities(p.span, shards);
  Buckets out;
  const std::size_t n = p.size();
  for (std::size_t i = 0, end = 0; i < n; i = end) {
    end = i + 1;
    while (!p.shared_embedding[i] && end < n && !p.shared_embedding[end]) ++end;
    const Size least_left = p.before[n] - p.before[end];  // what the params after need
    if (p.shared_embedding[i]) {
      out.push_back({i, end, p.span[i], Fit{}, true});
    } else {
      const Run run{p.span, p.before, i, end, shards, search};
      const std::optional<Buckets> buckets =
          cut_run(run, job.options.bucket_size, limit - size_of(out) - least_left, capacities);
      if (!buckets) return std::nullopt;
      out.insert(out.end(), buckets->begin(), buckets->end());
    }
    if (size_of(out) + least_left > limit) return std::nullopt;
  }
  return out;
}

/// The bin of each param of `bucket` at its capacity: packed by cost where that fits, else
/// as its capacity search packed it.
BinOf bins_of(const Positions& p, const Bucket& bucket, Shards shards) {
  const Size capacity = bucket.size / shards.count;
  if (std::optional<BinOf> by_cost =
          pack_by_cost(p.span, p.cost, bucket.from, bucket.to, shards, capacity)) {
    return *by_cost;
  }
  return bins_at(by_decreasing_span(p.span, bucket.from, bucket.to), shards, bucket.fit);
}

/// Each bucket's bins but shared embeddings', and what each bin costs.
struct BucketBins {
  std::vector<BinOf> bins;
  std::vector<std::vector<Cost>> cost;
};

/// The bins of `buckets`; the shared embeddings' costs go onto rank 0 of `load`.
BucketBins bins_of(const Positions& p, const Buckets& buckets, Shards shards,
                   std::vector<Cost>& load) {
  BucketBins out;
  for (const Bucket& bucket : buckets) {
    if (bucket.shared_embedding) {
      load[0] += p.cost[bucket.from];
      continue;
    }
    const BinOf& bins = out.bins.emplace_back(bins_of(p, bucket, shards));
    std::vector<Cost>& costs = out.cost.emplace_back(static_cast<std::size_t>(shards.count), 0);
    for (std::size_t q = bucket.from; q < bucket.to; ++q) {
      costs[static_cast<std::size_t>(bins[q - bucket.from])] += p.cost[q];
    }
  }
  return out;
}

/// The packing of `buckets`, each bin `bins.bins` gave a param going to the shard
/// `shard_of_bin` gave the bin.
Packing packing_of(const BufferJob& job, const Buckets& buckets, const BucketBins& bins,
                   const std::vector<std::vector<std::int64_t>>& shard_of_bin) {
  Packing out;
  const std::size_t n = job.group.params.size();
  std::size_t b = 0;  // into bins and shard_of_bin
  for (const Bucket& bucket : buckets) {
    if (bucket.shared_embedding) {
      const std::size_t k = n - 1 - bucket.from;
      out.add(k, 0);
      out.close_bucket(shared_embedding_shard(job, k), job.param(k).numel);
      continue;
    }
    Wide numel = 0;
    for (std::size_t q = bucket.from; q < bucket.to; ++q) {
      const std::size_t k = n - 1 - q;
      out.add(k, shard_of_bin[b][static_cast<std::size_t>(bins.bins[b][q - bucket.from])]);
      numel += job.param(k).numel;
    }
    out.close_bucket(bucket.size / job.group.num_shards, numel);
    ++b;
  }
  return out;
}

}  // namespace

std::optional<Packing> pack_balanced(const BufferJob& job, const std::vector<Cost>& cost,
                                     Wide limit, std::vector<Cost> load, Cost target, bool search) {
  const std::int64_t dp = job.group.num_shards;
  const Shards shards{dp, shard_divisor(dp, job.options.pad_for_high_nccl_busbw)};
  // Capacities stay below 4x the larger of the params' span and the limit, plus a shard
  // divisor; dp of them below 2^63.
  const Wide size_limit = Wide{std::numeric_limits<Size>::max()} / 8 / dp - shards.divisor;
  if (limit > size_limit) return std::nullopt;
  const std::optional<Positions> p = positions_of(job, cost, shards, size_limit);
  if (!p) return std::nullopt;
  const std::optional<Buckets> buckets =
      cut_runs(job, *p, shards, static_cast<Size>(limit), search);
  if (!buckets) return std::nullopt;
  const BucketBins bins = bins_of(*p, *buckets, shards, load);
  const std::vector<std::vector<std::int64_t>> shard_of_bin = assign_bins(bins.cost, load, target);
  if (*std::max_element(load.begin(), load.end()) > target) return std::nullopt;
  return packing_of(job, *buckets, bins, shard_of_bin);
}

}  // namespace paramlayout::layerwise
