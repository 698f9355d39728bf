// docs/strategies.md, Layerwise packing: Megatron's LayerWiseDistributedOptimizer layout
// (Muon), where every param sits whole inside one rank's shard of its bucket.
//
// The reference scans all dp shards for every param. Here each question it asks of the
// shards ("least-loaded shard with room", "emptiest shard", "least-filled estimate") is
// answered by a structure in O(log dp), and per-bucket state is reset only where a bucket
// touched it, so planning grows with params, not params x dp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

#include "strategies.hpp"

namespace paramlayout::strategies {

std::optional<Wide> newton_schulz_cost(const Param& param) {
  if (param.shape.size() != 2) return Wide{param.numel};
  Wide m = param.shape[0];
  const Wide n = param.shape[1];
  Wide cost = 0;
  if (param.gtp_remat_size > 1 && __builtin_mul_overflow(m, Wide{param.gtp_remat_size}, &m)) {
    return std::nullopt;
  }
  const Wide big = std::max(m, n);
  const Wide small = std::min(m, n);
  if (__builtin_mul_overflow(big, small, &cost) || __builtin_mul_overflow(cost, small, &cost)) {
    return std::nullopt;
  }
  return cost;
}

Result<std::vector<Wide>> newton_schulz_costs(const BufferJob& job) {
  std::vector<Wide> costs(job.group.params.size());
  for (std::size_t k = 0; k < costs.size(); ++k) {
    const std::optional<Wide> cost = newton_schulz_cost(job.param(k));
    if (!cost) {
      return Error{fmt::format("{}: param \"{}\": its Newton-Schulz cost (shape and "
                               "gtp_remat_size) exceeds 127 bits",
                               job.manifest.source, job.param(k).name)};
    }
    costs[k] = *cost;
  }
  return costs;
}

namespace {

/// Up to this many shards, scanning them all beats any tree.
constexpr std::int64_t kScanLimit = 64;

/// Each shard's accumulated cost (load) and fill; finds the least-loaded shard, lowest id on
/// ties, whose fill is at most a limit. Beyond kScanLimit shards a treap keyed by
/// (load, id), each node knowing the smallest fill below it, answers in O(log dp).
class LeastLoadedShard {
 public:
  explicit LeastLoadedShard(std::int64_t shards)
      : load_(static_cast<std::size_t>(shards)), fill_(static_cast<std::size_t>(shards)) {
    if (shards <= kScanLimit) return;
    nodes_.resize(static_cast<std::size_t>(shards));
    std::uint64_t state = 0x9E3779B97F4A7C15ULL;
    for (std::int32_t s = 0; s < static_cast<std::int32_t>(shards); ++s) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      nodes_[s].priority = state;
      root_ = merge(root_, s);
    }
  }

  /// The shard with the smallest (load, id) among those with fill <= limit, or -1.
  std::int32_t find(Wide limit) const {
    if (nodes_.empty()) {
      std::int32_t best = -1;
      for (std::int32_t s = 0; s < static_cast<std::int32_t>(load_.size()); ++s) {
        if (fill_[s] <= limit && (best < 0 || load_[s] < load_[best])) best = s;
      }
      return best;
    }
    std::int32_t t = root_;
    while (t >= 0) {
      const Node& n = nodes_[t];
      if (n.left >= 0 && nodes_[n.left].min_fill <= limit) {
        t = n.left;
      } else if (fill_[t] <= limit) {
        return t;
      } else if (n.right >= 0 && nodes_[n.right].min_fill <= limit) {
        t = n.right;
      } else {
        return -1;
      }
    }
    return -1;
  }

  Wide load(std::int32_t s) const { return load_[s]; }

  /// Gives shard `s` a new (higher or equal) load and a new fill.
  void set(std::int32_t s, Wide load, Wide fill) {
    if (nodes_.empty()) {
      load_[s] = load;
      fill_[s] = fill;
      return;
    }
    root_ = erase(root_, s);
    load_[s] = load;
    fill_[s] = fill;
    nodes_[s].min_fill = fill;
    nodes_[s].left = nodes_[s].right = -1;
    root_ = insert(root_, s);
  }

  /// Gives shard `s` a new fill; its place in the order does not change.
  void set_fill(std::int32_t s, Wide fill) {
    fill_[s] = fill;
    if (!nodes_.empty()) refresh_path(root_, s);
  }

 private:
  struct Node {
    Wide min_fill = 0;
    std::uint64_t priority = 0;
    std::int32_t left = -1;
    std::int32_t right = -1;
  };

  bool before(std::int32_t a, std::int32_t b) const {
    return load_[a] < load_[b] || (load_[a] == load_[b] && a < b);
  }

  void pull(std::int32_t t) {
    Node& n = nodes_[t];
    n.min_fill = fill_[t];
    if (n.left >= 0) n.min_fill = std::min(n.min_fill, nodes_[n.left].min_fill);
    if (n.right >= 0) n.min_fill = std::min(n.min_fill, nodes_[n.right].min_fill);
  }

  std::int32_t merge(std::int32_t a, std::int32_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (nodes_[a].priority > nodes_[b].priority) {
      nodes_[a].right = merge(nodes_[a].right, b);
      pull(a);
      return a;
    }
    nodes_[b].left = merge(a, nodes_[b].left);
    pull(b);
    return b;
  }

  // Splits `t` into the nodes ordered before `key` and the rest.
  void split(std::int32_t t, std::int32_t key, std::int32_t& left, std::int32_t& right) {
    if (t < 0) {
      left = right = -1;
    } else if (before(t, key)) {
      split(nodes_[t].right, key, nodes_[t].right, right);
      left = t;
      pull(t);
    } else {
      split(nodes_[t].left, key, left, nodes_[t].left);
      right = t;
      pull(t);
    }
  }

  std::int32_t erase(std::int32_t t, std::int32_t key) {
    if (t == key) return merge(nodes_[t].left, nodes_[t].right);
    std::int32_t& child = before(key, t) ? nodes_[t].left : nodes_[t].right;
    child = erase(child, key);
    pull(t);
    return t;
  }

  std::int32_t insert(std::int32_t t, std::int32_t node) {
    if (t < 0) return node;
    if (nodes_[node].priority > nodes_[t].priority) {
      split(t, node, nodes_[node].left, nodes_[node].right);
      pull(node);
      return node;
    }
    std::int32_t& child = before(node, t) ? nodes_[t].left : nodes_[t].right;
    child = insert(child, node);
    pull(t);
    return t;
  }

  void refresh_path(std::int32_t t, std::int32_t key) {
    if (t != key) refresh_path(before(key, t) ? nodes_[t].left : nodes_[t].right, key);
    pull(t);
  }

  std::vector<Wide> load_;
  std::vector<Wide> fill_;
  std::vector<Node> nodes_;  ///< empty when scanning
  std::int32_t root_ = -1;
};

/// Per-shard cursors of the bucket being packed, with the emptiest shard (smallest cursor,
/// lowest id) at hand: a scan for few shards, else a segment tree of argmins.
class EmptiestShard {
 public:
  explicit EmptiestShard(std::int64_t shards) : shards_(shards) {
    if (shards <= kScanLimit) {
      cursor_.assign(static_cast<std::size_t>(shards), 0);
      return;
    }
    while (leaves_ < shards) leaves_ *= 2;
    cursor_.assign(static_cast<std::size_t>(leaves_), kWideMax);
    std::fill(cursor_.begin(), cursor_.begin() + shards, Wide{0});
    best_.resize(static_cast<std::size_t>(2 * leaves_));
    for (std::int64_t i = 0; i < leaves_; ++i) best_[leaves_ + i] = static_cast<std::int32_t>(i);
    for (std::int64_t i = leaves_ - 1; i > 0; --i) best_[i] = pick(best_[2 * i], best_[2 * i + 1]);
  }

  std::int32_t find() const {
    if (!best_.empty()) return best_[1];
    std::int32_t best = 0;
    for (std::int32_t s = 1; s < static_cast<std::int32_t>(shards_); ++s) best = pick(best, s);
    return best;
  }

  Wide cursor(std::int32_t s) const { return cursor_[s]; }

  void set(std::int32_t s, Wide cursor) {
    cursor_[s] = cursor;
    if (best_.empty()) return;
    for (std::int64_t i = (leaves_ + s) / 2; i > 0; i /= 2) {
      best_[i] = pick(best_[2 * i], best_[2 * i + 1]);
    }
  }

 private:
  std::int32_t pick(std::int32_t a, std::int32_t b) const {
    return cursor_[b] < cursor_[a] ? b : a;
  }

  std::int64_t shards_;
  std::int64_t leaves_ = 1;
  std::vector<Wide> cursor_;
  std::vector<std::int32_t> best_;  ///< empty when scanning
};

/// The chunk former's estimate of shard fill: each param goes to the least-filled shard
/// (lowest id on ties). Untouched shards are empty, so they are taken in id order and only
/// touched ones need a heap; a reset costs what the chunk placed.
class FillEstimate {
 public:
  explicit FillEstimate(std::int64_t shards) : shards_(shards) {}

  Wide min() const { return untouched_ < shards_ ? Wide{0} : heap_.top().first; }
  Wide max() const { return max_; }

  void place(std::int64_t numel) {
    Entry entry{0, untouched_};
    if (untouched_ < shards_) {
      ++untouched_;
    } else {
      entry = heap_.top();
      heap_.pop();
    }
    entry.first = align_param_start(entry.first) + numel;
    max_ = std::max(max_, entry.first);
    heap_.push(entry);
  }

  void reset() {
    heap_ = {};
    untouched_ = 0;
    max_ = 0;
  }

 private:
  using Entry = std::pair<Wide, std::int64_t>;
  std::int64_t shards_;
  std::int64_t untouched_ = 0;
  Wide max_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

}  // namespace

class MegatronPacking::Packer {
 public:
  explicit Packer(const BufferJob& job)
      : job_(job),
        dp_(job.group.num_shards),
        shard_divisor_(shard_divisor(dp_, job.options.pad_for_high_nccl_busbw)),
        loads_(dp_),
        cursors_(dp_) {}

  /// Packs the buffer, given every param's Newton-Schulz cost by position in the job: which
  /// shard of which bucket each param goes to (`write` lays them out).
  Result<void> run(std::vector<Wide> cost) {
    const std::size_t n = job_.group.params.size();
    cost_ = std::move(cost);
    assignments_.reserve(n);

    const std::optional<std::int64_t>& bucket_size = job_.options.bucket_size;
    FillEstimate estimate(dp_);
    std::vector<std::size_t> chunk;
    Wide chunk_numel = 0;
    std::int64_t chunk_max = 0;
    Wide threshold = 0;  // max(bucket_size, trunc(dp * chunk_max * 0.9)), kept with chunk_max
    auto pack_chunk = [&]() -> Result<void> {
      Result<void> packed = pack(chunk, chunk_numel);
      chunk.clear();
      chunk_numel = 0;
      chunk_max = 0;
      estimate.reset();
      return packed;
    };

    for (std::size_t k = n; k-- > 0;) {
      const Param& param = job_.param(k);
      if (param.shared_embedding) {
        if (Result<void> r = pack_chunk(); !r) return r;
        const std::size_t at = assignments_.size();
        assignments_.push_back({0, 0, k});
        buckets_.push_back({at, at + 1, 0, param.numel, true});
        shard0_extra_ = saturating_add(shard0_extra_, cost_[k]);
        continue;
      }
      if (bucket_size && !chunk.empty()) {
        const bool absorbed = align_param_start(estimate.min()) + param.numel <=
                              pad_to(estimate.max(), Wide{shard_divisor_});
        if (chunk_numel >= threshold && !absorbed) {
          if (Result<void> r = pack_chunk(); !r) return r;
        }
      }
      estimate.place(param.numel);
      chunk.push_back(k);
      chunk_numel += param.numel;
      if (param.numel > chunk_max) {
        chunk_max = param.numel;
        const Wide floor = static_cast<Wide>(
            std::trunc(static_cast<double>(Wide{dp_} * chunk_max) * 0.9));
        threshold = std::max(Wide{bucket_size.value_or(0)}, floor);
      }
    }
    return pack_chunk();
  }

  /// Each shard's Newton-Schulz cost, once run (saturated at 2^127 - 1).
  std::vector<Wide> rank_costs() const {
    std::vector<Wide> costs(static_cast<std::size_t>(dp_));
    for (std::int32_t s = 0; s < static_cast<std::int32_t>(dp_); ++s) costs[s] = loads_.load(s);
    costs[0] = saturating_add(costs[0], shard0_extra_);  // shared embeddings: shard 0
    return costs;
  }

  /// The packed buffer's size in elements, once run.
  Wide size() const {
    Wide size = 0;
    for (const PackedBucket& b : buckets_) {
      size += b.shared_embedding ? dp_ * pad_to(b.numel, Wide{shard_divisor_})
                                 : dp_ * b.shard_size;
    }
    return size;
  }

  /// Lays out the buckets and params as run packed them.
  void write(BufferBuilder& out) {
    LayerwiseBuckets buckets(out, dp_, shard_divisor_);
    for (const PackedBucket& b : buckets_) {
      if (b.shared_embedding) {
        buckets.shared_embedding(job_, assignments_[b.first].param);
        continue;
      }
      const auto first = assignments_.begin() + static_cast<std::ptrdiff_t>(b.first);
      const auto end = assignments_.begin() + static_cast<std::ptrdiff_t>(b.end);
      std::sort(first, end, [](const Assignment& x, const Assignment& y) {
        return x.shard < y.shard || (x.shard == y.shard && x.order < y.order);
      });
      std::int32_t shard = -1;
      Wide cursor = 0;
      for (auto a = first; a != end; ++a) {
        if (a->shard != shard) {
          shard = a->shard;
          cursor = buckets.start() + shard * b.shard_size;
        }
        cursor = align_param_start(cursor);
        out.place(job_, a->param, cursor, buckets.id());
        cursor += job_.param(a->param).numel;
      }
      buckets.close(b.shard_size, b.numel);
    }
  }

 private:
  struct Assignment {
    std::int32_t shard;
    std::size_t order;  ///< when it was assigned
    std::size_t param;
  };
  /// A bucket as packed: its params' assignments [first, end), dp shards of `shard_size`.
  struct PackedBucket {
    std::size_t first, end;
    Wide shard_size;
    Wide numel;  ///< of its params
    bool shared_embedding;
  };

  Result<void> pack(const std::vector<std::size_t>& chunk, Wide chunk_numel) {
    if (chunk.empty()) return {};
    // By descending cost; ties keep chunk (backprop) order, i.e. descending position.
    by_cost_ = chunk;
    std::sort(by_cost_.begin(), by_cost_.end(), [&](std::size_t a, std::size_t b) {
      return cost_[a] > cost_[b] || (cost_[a] == cost_[b] && a > b);
    });

    // The reference compares an int with the double cap exactly; so does floor(cap).
    const double cap = static_cast<double>(chunk_numel) / static_cast<double>(dp_) * (1.0 + 0.3);
    const Wide cap_floor = static_cast<Wide>(std::floor(cap));
    const std::size_t first = assignments_.size();
    touched_.clear();
    Wide max_cursor = 0;
    for (std::size_t k : by_cost_) {
      const std::int64_t numel = job_.param(k).numel;
      std::int32_t s = loads_.find(cap_floor - numel);
      if (s < 0) s = cursors_.find();
      const Wide cursor = cursors_.cursor(s);
      if (cursor == 0) touched_.push_back(s);
      const Wide new_cursor = align_param_start(cursor) + numel;
      Wide load = 0;
      if (__builtin_add_overflow(loads_.load(s), cost_[k], &load)) {
        return Error{job_.manifest.source + ": the Newton-Schulz costs of buffer " +
                     describe(job_.group.key) + " add up to more than 127 bits"};
      }
      cursors_.set(s, new_cursor);
      loads_.set(s, load, align_param_start(new_cursor));
      max_cursor = std::max(max_cursor, new_cursor);
      assignments_.push_back({s, assignments_.size() - first, k});
    }
    for (std::int32_t s : touched_) {
      cursors_.set(s, 0);
      loads_.set_fill(s, 0);
    }
    buckets_.push_back({first, assignments_.size(), pad_to(max_cursor, Wide{shard_divisor_}),
                        chunk_numel, false});
    return {};
  }

  const BufferJob& job_;
  const std::int64_t dp_;
  const std::int64_t shard_divisor_;
  std::vector<Wide> cost_;
  Wide shard0_extra_ = 0;  ///< the shared embeddings' cost
  LeastLoadedShard loads_;
  EmptiestShard cursors_;
  std::vector<std::size_t> by_cost_;
  std::vector<Assignment> assignments_;  ///< every bucket's, bucket by bucket
  std::vector<PackedBucket> buckets_;
  std::vector<std::int32_t> touched_;
};

Result<MegatronPacking> MegatronPacking::pack(const BufferJob& job, std::vector<Wide> cost) {
  auto packer = std::make_unique<Packer>(job);
  if (Result<void> r = packer->run(std::move(cost)); !r) return r.error();
  return MegatronPacking(std::move(packer));
}

MegatronPacking::MegatronPacking(std::unique_ptr<Packer> packer) : packer_(std::move(packer)) {}
MegatronPacking::MegatronPacking(MegatronPacking&&) noexcept = default;
MegatronPacking& MegatronPacking::operator=(MegatronPacking&&) noexcept = default;
MegatronPacking::~MegatronPacking() = default;
Wide MegatronPacking::size() const { return packer_->size(); }
std::vector<Wide> MegatronPacking::rank_costs() const { return packer_->rank_costs(); }
void MegatronPacking::write(BufferBuilder& out) { packer_->write(out); }

Result<void> lay_out_layerwise(const BufferJob& job, BufferBuilder& out) {
  Result<std::vector<Wide>> cost = newton_schulz_costs(job);
  if (!cost) return cost.error();
  Result<MegatronPacking> packing = MegatronPacking::pack(job, std::move(*cost));
  if (!packing) return packing.error();
  packing->write(out);
  return {};
}

}  // namespace paramlayout::strategies
