// The `balanced` layerwise packer: the promises of section 4 of strategies.md (every param
// whole in one shard, buckets contiguous in backprop order, sizes divisible as required),
// with less padding than Megatron-LM's greedy packer.
//
// A bucket is dp bins of one capacity. A run of params (between shared embeddings) is cut
// into about as many buckets as a greedy pass needs (or a few fewer, when that pads less),
// of about equal totals, so the last bucket is as full as the others; each bucket gets the
// smallest capacity at which best-fit-decreasing packs it, and at that capacity its params
// are packed by Newton-Schulz cost where they fit. Bins then go to shards costliest first
// onto the least-loaded shards, loads kept across the buffer's buckets. Megatron-LM's
// packing of the buffer is made too, and kept where it pads less or loads a rank more
// lightly, so `balanced` never loses on either.
#include <algorithm>
#include <functional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "strategies.hpp"

namespace paramlayout::strategies {
namespace {

/// Dp bins of one capacity, filled best-fit: an item goes to the fullest bin it fits in.
/// A scan for few bins, an ordered set of (room, bin) for many.
class Bins {
 public:
  Bins(std::int64_t count, Wide capacity) : room_(static_cast<std::size_t>(count), capacity) {
    if (count <= kScanBins) return;
    for (std::int64_t b = 0; b < count; ++b) by_room_.insert({capacity, b});
  }
  /// Puts an item of `size` (its aligned span) in a bin; -1 when none has room.
  std::int64_t put(Wide size) {
    std::int64_t bin = -1;
    if (by_room_.empty()) {
      for (std::size_t b = 0; b < room_.size(); ++b) {
        if (room_[b] >= size && (bin < 0 || room_[b] < room_[static_cast<std::size_t>(bin)])) {
          bin = static_cast<std::int64_t>(b);
        }
      }
    } else {
      auto it = by_room_.lower_bound({size, -1});
      if (it != by_room_.end()) {
        bin = it->second;
        by_room_.erase(it);
        by_room_.insert({room_[static_cast<std::size_t>(bin)] - size, bin});
      }
    }
    if (bin >= 0) room_[static_cast<std::size_t>(bin)] -= size;
    return bin;
  }

 private:
  static constexpr std::int64_t kScanBins = 64;
  std::vector<Wide> room_;
  std::set<std::pair<Wide, std::int64_t>> by_room_;
};

/// Up to this many shards, packing first tries to balance cost (a scan of the bins per item).
constexpr std::int64_t kCostAwareLimit = 64;
/// Runs of more params than this try fewer bucket counts.
constexpr std::size_t kLongRun = 2000;

class BalancedPacker {
 public:
  BalancedPacker(const BufferJob& job, BufferBuilder& out)
      : job_(job),
        out_(out),
        dp_(job.group.num_shards),
        shard_divisor_(shard_divisor(dp_, job.options.pad_for_high_nccl_busbw)),
        loads_(static_cast<std::size_t>(dp_), 0),
        buckets_(out, dp_, shard_divisor_) {}

  /// Packs the buffer, given every param's Newton-Schulz cost by position in the job.
  void run(std::vector<Wide> cost) {
    cost_ = std::move(cost);
    const std::size_t n = job_.group.params.size();
    for (std::size_t k = n; k-- > 0;) order_.push_back(k);  // backprop order
    std::size_t i = 0;
    while (i < n) {
      if (job_.param(order_[i]).shared_embedding) {
        buckets_.shared_embedding(job_, order_[i]);
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < n && !job_.param(order_[end]).shared_embedding) ++end;
      i = pack_run(i, end);
    }
  }

 private:
  Wide span(std::size_t position) const {
    return align_param_start(Wide{job_.param(order_[position]).numel});
  }

  /// Positions [from, to) into dp bins of `capacity`: first by Newton-Schulz cost (the
  /// costliest item to the cheapest bin it fits in, which balances the optimizer's work),
  /// else best-fit-decreasing by size (which fits more). The bin of each position, or
  /// nothing when neither places every item.
  std::optional<std::vector<std::int64_t>> pack(std::size_t from, std::size_t to,
                                                Wide capacity, bool by_cost) const {
    std::vector<std::size_t> items(to - from);
    for (std::size_t q = from; q < to; ++q) items[q - from] = q;
    std::vector<std::int64_t> bin_of(to - from);
    if (by_cost && dp_ <= kCostAwareLimit) {
      std::sort(items.begin(), items.end(), [&](std::size_t a, std::size_t b) {
        if (cost_[order_[a]] != cost_[order_[b]]) return cost_[order_[a]] > cost_[order_[b]];
        return span(a) > span(b) || (span(a) == span(b) && a < b);
      });
      std::vector<Wide> room(static_cast<std::size_t>(dp_), capacity);
      std::vector<Wide> load(static_cast<std::size_t>(dp_), 0);
      bool placed = true;
      for (std::size_t q : items) {
        std::int64_t best = -1;
        for (std::int64_t bin = 0; bin < dp_; ++bin) {
          if (room[bin] >= span(q) && (best < 0 || load[bin] < load[best])) best = bin;
        }
        if (best < 0) {
          placed = false;
          break;
        }
        room[best] -= span(q);
        load[best] += cost_[order_[q]];
        bin_of[q - from] = best;
      }
      if (placed) return bin_of;
    }
    std::sort(items.begin(), items.end(), [&](std::size_t a, std::size_t b) {
      return span(a) > span(b) || (span(a) == span(b) && a < b);
    });
    Bins bins(dp_, capacity);
    for (std::size_t q : items) {
      const std::int64_t bin = bins.put(span(q));
      if (bin < 0) return std::nullopt;
      bin_of[q - from] = bin;
    }
    return bin_of;
  }

  /// About the smallest capacity (within 1/1024) from max(`at_least`, the largest param,
  /// total / dp) up at which best-fit-decreasing packs positions [from, to); its bins.
  std::pair<Wide, std::vector<std::int64_t>> smallest_fit(std::size_t from, std::size_t to,
                                                          Wide at_least) const {
    Wide total = 0;
    Wide largest = 0;
    for (std::size_t q = from; q < to; ++q) {
      total += span(q);
      largest = std::max(largest, span(q));
    }
    const Wide lowest = pad_to(std::max({at_least, largest, (total + dp_ - 1) / dp_}),
                               Wide{shard_divisor_});
    if (std::optional<std::vector<std::int64_t>> bins = pack(from, to, lowest, false)) {
      return {lowest, std::move(*bins)};
    }
    // Gallop up from `lowest` to a capacity that packs, then bisect down to within
    // 1/1024 of the smallest one that does.
    Wide failed = lowest;
    Wide step = std::max<Wide>(lowest / 256, shard_divisor_);
    Wide capacity = pad_to(lowest + step, Wide{shard_divisor_});
    std::optional<std::vector<std::int64_t>> bins;
    while (!(bins = pack(from, to, capacity, false))) {
      failed = capacity;
      step *= 2;
      capacity = pad_to(lowest + step, Wide{shard_divisor_});
    }
    const Wide resolution = std::max<Wide>(lowest / 1024, shard_divisor_);
    while (capacity - failed > resolution) {
      const Wide middle = pad_to(failed + (capacity - failed) / 2, Wide{shard_divisor_});
      if (middle >= capacity) break;
      if (std::optional<std::vector<std::int64_t>> tighter = pack(from, to, middle, false)) {
        capacity = middle;
        bins = std::move(tighter);
      } else {
        failed = middle;
      }
    }
    return {capacity, std::move(*bins)};
  }

  /// Packs the params at positions [from, end) (no shared embedding among them) into
  /// buckets; returns `end`.
  std::size_t pack_run(std::size_t from, std::size_t end) {
    const std::optional<std::int64_t>& bucket_size = job_.options.bucket_size;
    if (!bucket_size) {
      auto [capacity, bins] = smallest_fit(from, end, 0);
      emit(from, end, capacity, std::move(bins));
      return end;
    }
    // How many buckets: greedily, each takes params while they fit dp shards of
    // max(bucket_size / dp, its largest param).
    const Wide target = (Wide{*bucket_size} + dp_ - 1) / dp_;
    std::size_t buckets = 0;
    Wide run_total = 0;
    for (std::size_t q = from; q < end;) {
      Wide largest = 0;
      Wide total = 0;
      for (; q < end; ++q) {
        const Wide next_largest = std::max(largest, span(q));
        if (total > 0 && total + span(q) > dp_ * std::max(target, next_largest)) break;
        largest = next_largest;
        total += span(q);
      }
      run_total += total;
      ++buckets;
    }
    // Then cut the run into that many buckets of about equal totals, so that the last is
    // as full as the others, each with the smallest shards that hold it. A few buckets
    // fewer (larger) can pad much less when the largest params set the shard size; the
    // count with the least padding wins (bucket_size is a soft target).
    // Long runs (thousands of experts) try fewer counts, to keep planning fast.
    const bool long_run = end - from > kLongRun;
    std::set<std::size_t, std::greater<>> counts;
    for (std::size_t fewer = 0; fewer <= (long_run ? 1 : 4) && fewer < buckets; ++fewer) {
      counts.insert(buckets - fewer);
    }
    for (int percent = 50; percent < 100; percent += long_run ? 25 : 5) {
      counts.insert(std::max<std::size_t>(1, buckets * static_cast<std::size_t>(percent) / 100));
    }
    std::vector<Bucket> best;
    for (std::size_t count : counts) {  // from the most buckets down: ties keep more
      std::vector<Bucket> option = cut(from, end, count, run_total, target);
      if (best.empty() || size_of(option) < size_of(best)) best = std::move(option);
    }
    for (Bucket& bucket : best) {
      emit(bucket.from, bucket.to, bucket.size / dp_, std::move(bucket.bins));
    }
    return end;
  }

  struct Bucket {
    std::size_t from = 0;
    std::size_t to = 0;
    Wide size = 0;  ///< dp * shard size
    std::vector<std::int64_t> bins;
  };

  static Wide size_of(const std::vector<Bucket>& buckets) {
    Wide size = 0;
    for (const Bucket& b : buckets) size += b.size;
    return size;
  }

  /// Positions [from, end) in `count` buckets of about equal totals.
  std::vector<Bucket> cut(std::size_t from, std::size_t end, std::size_t count, Wide run_total,
                          Wide target) const {
    std::vector<Bucket> out;
    std::size_t q = from;
    Wide done = 0;
    for (std::size_t k = 1; k <= count && q < end; ++k) {
      const Wide goal = run_total * static_cast<Wide>(k) / static_cast<Wide>(count);
      std::size_t to = q;
      Wide total = done;
      while (to < end && (k == count || to == q || total + span(to) <= goal ||
                          goal - total > total + span(to) - goal)) {
        total += span(to);
        ++to;
      }
      auto [capacity, bins] = smallest_fit(q, to, target);
      out.push_back({q, to, capacity * dp_, std::move(bins)});
      done = total;
      q = to;
    }
    return out;
  }

  /// Places positions [from, to) by their bins, giving the costliest bin the least-loaded
  /// shard, and closes the bucket.
  void emit(std::size_t from, std::size_t to, Wide capacity, std::vector<std::int64_t> bin_of) {
    // The sizes are settled; at the same capacity, packing by cost balances the ranks.
    if (std::optional<std::vector<std::int64_t>> by_cost = pack(from, to, capacity, true)) {
      bin_of = std::move(*by_cost);
    }
    std::vector<Wide> bin_cost(static_cast<std::size_t>(dp_), 0);
    std::vector<Wide> bin_fill(static_cast<std::size_t>(dp_), 0);
    Wide numel = 0;
    for (std::size_t q = from; q < to; ++q) {
      const std::size_t bin = static_cast<std::size_t>(bin_of[q - from]);
      bin_cost[bin] += cost_[order_[q]];
      bin_fill[bin] += span(q);
      numel += job_.param(order_[q]).numel;
    }
    std::vector<std::int64_t> bins(static_cast<std::size_t>(dp_));
    std::vector<std::int64_t> shards(static_cast<std::size_t>(dp_));
    for (std::int64_t s = 0; s < dp_; ++s) bins[s] = shards[s] = s;
    std::stable_sort(bins.begin(), bins.end(),
                     [&](std::int64_t a, std::int64_t b) { return bin_cost[a] > bin_cost[b]; });
    std::stable_sort(shards.begin(), shards.end(),
                     [&](std::int64_t a, std::int64_t b) { return loads_[a] < loads_[b]; });
    std::vector<std::int64_t> shard_of_bin(static_cast<std::size_t>(dp_));
    for (std::int64_t r = 0; r < dp_; ++r) {
      shard_of_bin[bins[r]] = shards[r];
      loads_[shards[r]] += bin_cost[bins[r]];
    }
    const Wide shard_size =
        pad_to(*std::max_element(bin_fill.begin(), bin_fill.end()), Wide{shard_divisor_});
    // Placed by start: shard by shard, each shard's params in backprop order.
    std::vector<std::pair<std::int64_t, std::size_t>> by_start;
    for (std::size_t q = from; q < to; ++q) by_start.push_back({shard_of_bin[bin_of[q - from]], q});
    std::sort(by_start.begin(), by_start.end());
    std::int64_t shard = -1;
    Wide at = 0;
    for (const auto& [s, q] : by_start) {
      if (s != shard) {
        shard = s;
        at = buckets_.start() + s * shard_size;
      }
      out_.place(job_, order_[q], at, buckets_.id());
      at += span(q);
    }
    buckets_.close(shard_size, numel);
  }

  const BufferJob& job_;
  BufferBuilder& out_;
  const std::int64_t dp_;
  const std::int64_t shard_divisor_;
  std::vector<std::size_t> order_;  ///< param indices in backprop order
  std::vector<Wide> cost_;
  std::vector<Wide> loads_;  ///< Newton-Schulz cost per shard, across buckets
  LayerwiseBuckets buckets_;
};

/// The largest per-shard Newton-Schulz cost of a packed buffer; `cost` by param position.
double heaviest_shard(const BufferJob& job, const BufferLayout& layout,
                      const std::vector<Wide>& cost) {
  std::unordered_map<std::string_view, std::size_t> position;
  for (std::size_t k = 0; k < job.group.params.size(); ++k) position.emplace(job.param(k).name, k);
  const std::int64_t shards = job.group.num_shards;
  std::vector<double> load(static_cast<std::size_t>(shards), 0.0);
  for (const ParamSlot& p : layout.params) {
    const BucketRange& bucket = layout.buckets[static_cast<std::size_t>(p.bucket)];
    load[static_cast<std::size_t>((p.start - bucket.start) / (bucket.size() / shards))] +=
        static_cast<double>(cost[position.at(p.name)]);
  }
  return *std::max_element(load.begin(), load.end());
}

}  // namespace

Result<void> lay_out_layerwise_balanced(const BufferJob& job, BufferBuilder& out) {
  // Megatron-LM's packing too: the balanced one is kept only where it is no worse in
  // padding and in the heaviest shard's Newton-Schulz cost, so `balanced` never loses.
  Result<std::vector<Wide>> cost = newton_schulz_costs(job);
  if (!cost) return cost.error();
  BufferLayout greedy_layout;
  BufferBuilder greedy(greedy_layout);
  if (Result<void> r = lay_out_layerwise(job, greedy, *cost); !r) return r;
  BufferLayout balanced_layout;
  BufferBuilder balanced(balanced_layout);
  BalancedPacker(job, balanced).run(*cost);
  const auto size = [](const BufferLayout& b) {
    return b.buckets.empty() ? std::int64_t{0} : b.buckets.back().end;
  };
  const bool keep = size(balanced_layout) <= size(greedy_layout) &&
                    heaviest_shard(job, balanced_layout, *cost) <=
                        heaviest_shard(job, greedy_layout, *cost) * (1 + 1e-12);
  if (keep) {
    out.take(std::move(balanced_layout), balanced.max_offset());
  } else {
    out.take(std::move(greedy_layout), greedy.max_offset());
  }
  return {};
}

}  // namespace paramlayout::strategies
