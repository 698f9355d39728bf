// The questions Megatron-LM's packer asks of a buffer's shards, answered in O(log dp) rather
// than by a scan of every shard per param, so packing grows with params, not params x dp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "strategies/buffer_builder.hpp"

namespace paramlayout::layerwise {

using strategies::Wide;

/// Each shard's load (its cost so far) and fill: finds the least-loaded shard, lowest id on
/// ties, whose fill is at most a limit. Up to 64 shards a scan; beyond, a treap ordered by
/// (load, id), each node knowing the smallest fill below it.
class LeastLoadedShard {
 public:
  explicit LeastLoadedShard(std::int64_t shards);

  /// The shard with the smallest (load, id) among those with fill <= limit, or -1.
  std::int32_t find(Wide limit) const;
  Wide load(std::int32_t s) const { return load_[s]; }
  /// Gives shard `s` a new load, no lower than its last, and a new fill.
  void set(std::int32_t s, Wide load, Wide fill);
  /// Gives shard `s` a new fill.
  void set_fill(std::int32_t s, Wide fill);

  /// A node of the treap: shard `s` is node `s`.
  struct Node {
    Wide min_fill = 0;  ///< the smallest fill in its subtree
    std::uint64_t priority = 0;
    std::int32_t left = -1;
    std::int32_t right = -1;
  };

 private:
  std::vector<Wide> load_;
  std::vector<Wide> fill_;
  std::vector<Node> nodes_;  ///< empty when scanning
  std::int32_t root_ = -1;
};

/// Each shard's cursor, with the emptiest shard (smallest cursor, lowest id) at hand: a scan
/// up to 64 shards, else a segment tree of argmins.
class EmptiestShard {
 public:
  explicit EmptiestShard(std::int64_t shards);
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

/// How full the chunk being formed would leave the shards: each param goes to the
/// least-filled shard (lowest id on ties), after aligning its start. Untouched shards are
/// empty, so they are taken in id order and only touched ones need a heap; a reset costs
/// what the chunk placed.
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

}  // namespace paramlayout::layerwise
