#include "layerwise/shard_queues.hpp"

#include <algorithm>

namespace paramlayout::layerwise {
namespace {

/// Up to this many shards, a scan beats any tree.
constexpr std::int64_t kScanLimit = 64;

/// LeastLoadedShard's treap: its nodes ordered by (load, id).
struct Treap {
  using Node = LeastLoadedShard::Node;
  std::vector<Node>& nodes;
  const std::vector<Wide>& load;
  const std::vector<Wide>& fill;

  bool before(std::int32_t a, std::int32_t b) const {
    return load[a] < load[b] || (load[a] == load[b] && a < b);
  }

  /// Sets node `t`'s smallest fill from its own and its children's.
  void pull(std::int32_t t) {
    Node& n = nodes[t];
    n.min_fill = fill[t];
    if (n.left >= 0) n.min_fill = std::min(n.min_fill, nodes[n.left].min_fill);
    if (n.right >= 0) n.min_fill = std::min(n.min_fill, nodes[n.right].min_fill);
  }

  std::int32_t merge(std::int32_t a, std::int32_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (nodes[a].priority > nodes[b].priority) {
      nodes[a].right = merge(nodes[a].right, b);
      pull(a);
      return a;
    }
    nodes[b].left = merge(a, nodes[b].left);
    pull(b);
    return b;
  }

  /// Splits `t` into the nodes ordered before `key` and the rest.
  void split(std::int32_t t, std::int32_t key, std::int32_t& left, std::int32_t& right) {
    if (t < 0) {
      left = right = -1;
    } else if (before(t, key)) {
      split(nodes[t].right, key, nodes[t].right, right);
      left = t;
      pull(t);
    } else {
      split(nodes[t].left, key, left, nodes[t].left);
      right = t;
      pull(t);
    }
  }

  std::int32_t erase(std::int32_t t, std::int32_t key) {
    if (t == key) return merge(nodes[t].left, nodes[t].right);
    std::int32_t& child = before(key, t) ? nodes[t].left : nodes[t].right;
    child = erase(child, key);
    pull(t);
    return t;
  }

  std::int32_t insert(std::int32_t t, std::int32_t node) {
    if (t < 0) return node;
    if (nodes[node].priority > nodes[t].priority) {
      split(t, node, nodes[node].left, nodes[node].right);
      pull(node);
      return node;
    }
    std::int32_t& child = before(node, t) ? nodes[t].left : nodes[t].right;
    child = insert(child, node);
    pull(t);
    return t;
  }

  /// Refreshes the smallest fills on the path from `t` down to `key`.
  void refresh_path(std::int32_t t, std::int32_t key) {
    if (t != key) refresh_path(before(key, t) ? nodes[t].left : nodes[t].right, key);
    pull(t);
  }
};

}  // namespace

LeastLoadedShard::LeastLoadedShard(std::int64_t shards)
    : load_(static_cast<std::size_t>(shards)), fill_(static_cast<std::size_t>(shards)) {
  if (shards <= kScanLimit) return;
  nodes_.resize(static_cast<std::size_t>(shards));
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;  // xorshift: any fixed priorities do
  for (std::int32_t s = 0; s < static_cast<std::int32_t>(shards); ++s) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    nodes_[s].priority = state;
    root_ = Treap{nodes_, load_, fill_}.merge(root_, s);
  }
}

std::int32_t LeastLoadedShard::find(Wide limit) const {
  if (nodes_.empty()) {
    std::int32_t best = -1;
    for (std::int32_t s = 0; s < static_cast<std::int32_t>(load_.size()); ++s) {
      if (fill_[s] <= limit && (best < 0 || load_[s] < load_[best])) best = s;
    }
    return best;
  }
  for (std::int32_t t = root_; t >= 0;) {
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

void LeastLoadedShard::set(std::int32_t s, Wide load, Wide fill) {
  if (nodes_.empty()) {
    load_[s] = load;
    fill_[s] = fill;
    return;
  }
  Treap treap{nodes_, load_, fill_};
  root_ = treap.erase(root_, s);
  load_[s] = load;
  fill_[s] = fill;
  nodes_[s].min_fill = fill;
  nodes_[s].left = nodes_[s].right = -1;
  root_ = treap.insert(root_, s);
}

void LeastLoadedShard::set_fill(std::int32_t s, Wide fill) {
  fill_[s] = fill;
  if (!nodes_.empty()) Treap{nodes_, load_, fill_}.refresh_path(root_, s);
}

EmptiestShard::EmptiestShard(std::int64_t shards) : shards_(shards) {
  if (shards <= kScanLimit) {
    cursor_.assign(static_cast<std::size_t>(shards), 0);
    return;
  }
  while (leaves_ < shards) leaves_ *= 2;
  cursor_.assign(static_cast<std::size_t>(leaves_), ~(Wide{1} << 127));  // padding: never
  std::fill(cursor_.begin(), cursor_.begin() + shards, Wide{0});
  best_.resize(static_cast<std::size_t>(2 * leaves_));
  for (std::int64_t i = 0; i < leaves_; ++i) best_[leaves_ + i] = static_cast<std::int32_t>(i);
  for (std::int64_t i = leaves_ - 1; i > 0; --i) best_[i] = pick(best_[2 * i], best_[2 * i + 1]);
}

}  // namespace paramlayout::layerwise
