// The `balanced` layerwise packer (docs/strategies.md, The balanced packer): the promises of
// layerwise packing (every param whole in one shard, buckets contiguous in backprop order,
// sizes divisible as required), with less padding than Megatron-LM's greedy packer.
//
// A bucket is dp bins of one capacity. A run of params (between shared embeddings) is cut
// into about as many buckets as a greedy pass needs (or a few fewer, when that pads less),
// of about equal totals, so the last bucket is as full as the others; each bucket gets the
// smallest capacity at which best-fit-decreasing packs it, and at that capacity its params
// are packed by Newton-Schulz cost where they fit. Bins then go to shards costliest first
// onto the least-loaded ranks, loads kept across the buckets (and the buffers of the same
// ranks planned before), and swaps within a bucket lighten the heaviest rank. Megatron-LM's
// packing of the buffer is made first; `balanced` gives up as soon as it cannot match its
// size, and Megatron-LM's is kept where it pads less or, counting the buffers before, loads
// a rank more lightly, so `balanced` never loses on either (plan() checks the whole layout).
#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <memory_resource>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "strategies.hpp"

namespace paramlayout::strategies {
namespace {

/// Element counts. Every size the packer meets fits in 64 bits: it plans only buffers of
/// less than 2^60 / dp elements (BalancedPacker::plan).
using Size = std::int64_t;

/// Dp bins of one capacity, filled best-fit: an item goes to the fullest bin it fits in
/// (the first such bin on ties). Bins are kept as groups of consecutive bins with equal
/// room, sorted by (room, first bin). Equal items fill the best bin before the next (it
/// stays the fullest that fits), and the next is the group's next bin, so a run of equal
/// items costs a few operations per group it reaches, not one per item or per bin.
class Bins {
 public:
  explicit Bins(std::pmr::memory_resource* arena) : groups_(arena) { groups_.reserve(16); }

  /// Empties the bins: `count` of them, each with room for `capacity`.
  void reset(std::int64_t count, Size capacity) {
    capacity_ = capacity;
    groups_.assign(1, {capacity, 0, count});
  }

  /// Puts `count` items of `size` (their aligned span), calling `into(first, bins, n)` when
  /// each of `bins` bins from `first` takes n of them; false when one found no room.
  template <class Into>
  bool put(Size size, std::int64_t count, Into into) {
    while (count > 0) {
      auto it = std::lower_bound(groups_.begin(), groups_.end(), Group{size, -1, 0});
      if (it == groups_.end()) return false;
      Group g = *it;
      groups_.erase(it);
      const Size fits = g.room / size;
      const Size full = std::min(g.count, count / fits);
      if (full > 0) {
        insert({g.room - fits * size, g.first, full});
        into(g.first, full, fits);
        count -= full * fits;
        g.first += full;
        g.count -= full;
      }
      if (count > 0 && g.count > 0) {  // fewer than `fits` left: one bin takes them
        insert({g.room - count * size, g.first, 1});
        into(g.first, 1, count);
        count = 0;
        ++g.first;
        --g.count;
      }
      if (g.count > 0) insert(g);
    }
    return true;
  }

  /// What the fullest bin holds.
  Size fullest() const { return capacity_ - groups_.front().room; }

 private:
  struct Group {
    Size room;
    std::int64_t first;
    std::int64_t count;
    bool operator<(const Group& o) const {
      return std::tie(room, first) < std::tie(o.room, o.first);
    }
  };
  void insert(const Group& g) {
    groups_.insert(std::upper_bound(groups_.begin(), groups_.end(), g), g);
  }

  Size capacity_ = 0;
  std::pmr::vector<Group> groups_;  ///< sorted; few, since bins fill in runs
};

/// Up to this many shards, packing first tries to balance cost (a scan of the bins per item).
constexpr std::int64_t kCostAwareLimit = 64;
/// Bin-by-bin filling applies to buckets of at most this many shards and param sizes, and
/// gives up a bin's search after this many steps.
constexpr std::int64_t kFillShardLimit = 64;
constexpr std::size_t kFillSizeLimit = 12;
constexpr int kFillSteps = 128;

/// The search for one bin's best filling: how many items of each size (largest first) fill
/// `room` best; gives up after kFillSteps steps.
struct FillSearch {
  using Counts = std::array<std::int64_t, kFillSizeLimit>;
  std::size_t sizes = 0;
  Counts span{};
  Counts left{};                                         ///< of each size, not yet placed
  std::array<std::int64_t, kFillSizeLimit + 1> after{};  ///< what sizes [i, n) have left, in all
  Counts best{};                                         ///< the best found
  std::int64_t room = 0;
  std::int64_t reach = 0;  ///< the fullest any choice can be: room, down to the sizes' gcd
  std::int64_t best_fill = -1;
  int steps = 0;

  /// Depth first from size `first` with the bin empty: of each size the most that fit, then
  /// fewer; a choice is dropped where even every smaller item left could not beat the best.
  void search(std::size_t first) {
    std::size_t i = first;
    at[i] = 0;
    for (;;) {  // at size i (or past the last) with the bin filled to at[i]
      if (at[i] > best_fill) {
        best_fill = at[i];
        best.fill(0);
        std::copy(count.begin() + first, count.begin() + i, best.begin() + first);
        if (best_fill == reach) return;
      }
      if (i < sizes) {
        if (--steps < 0) return;
        const std::int64_t free = room - at[i];
        count[i] = left[i] * span[i] <= free ? left[i] : free / span[i];  // spares a division
        at[i + 1] = at[i] + count[i] * span[i];
        if (at[i + 1] + after[i + 1] > best_fill) {
          ++i;
          continue;
        }
      }
      for (;;) {  // size i is done: back to the one before, to try one fewer there
        if (i == first) return;
        --i;
        at[i + 1] -= span[i];
        if (--count[i] >= 0 && at[i + 1] + after[i + 1] > best_fill) break;
      }
      ++i;
    }
  }

 private:
  std::array<std::int64_t, kFillSizeLimit + 1> at{};  ///< the fill on reaching each size
  Counts count{};                                     ///< of each size, being tried
};

/// The packer's first block of memory, in bytes (more come as needed).
constexpr std::size_t kArenaStart = 64 * 1024;
/// Buckets of at most this many distinct spans are sorted by span without comparisons.
constexpr std::size_t kFewSpans = 16;
/// At most this many swaps of bins between shards, to lighten the heaviest.
constexpr std::size_t kMaxSwaps = 256;
/// Runs of more params than this try fewer bucket counts, and neither fill bins one at a
/// time nor move cuts.
constexpr std::size_t kLongRun = 2000;
/// Capacities are searched to within 1/kResolution.
constexpr Size kResolution = 1024;
/// How far (in params) a cut between two buckets moves to make them smaller.
constexpr std::size_t kCutShift = 4;

class BalancedPacker {
 public:
  /// With `search`, buckets are also packed bin by bin and their cuts moved (tighter, but
  /// blind to Newton-Schulz cost); without, best-fit and equal cuts alone.
  BalancedPacker(const BufferJob& job, BufferBuilder& out, bool search)
      : job_(job),
        out_(out),
        search_(search),
        dp_(job.group.num_shards),
        shard_divisor_(shard_divisor(dp_, job.options.pad_for_high_nccl_busbw)),
        buckets_(out, dp_, shard_divisor_) {}

  /// Plans the buffer in at most `limit` elements, given every param's Newton-Schulz cost by
  /// position in the job; false when it cannot, or when the buffer is too large to plan in
  /// 64 bits (beyond 2^60 / dp elements: no real buffer).
  bool plan(const std::vector<Wide>& cost, Wide buffer_limit) {
    // Capacities stay below 4x the larger of the params' span and the limit, plus a shard
    // divisor; dp of them below 2^63.
    const Wide size_limit = Wide{std::numeric_limits<Size>::max()} / 8 / dp_ - shard_divisor_;
    if (buffer_limit > size_limit) return false;
    const auto limit = static_cast<Size>(buffer_limit);
    cost_.assign(cost.rbegin(), cost.rend());  // by position
    const std::size_t n = job_.group.params.size();
    order_.reserve(n);
    span_.reserve(n);
    prefix_.reserve(n + 1);
    power_.reserve(n + 1);
    before_.reserve(n + 1);
    prefix_.push_back(0);
    power_.push_back(1);
    before_.push_back(0);
    Wide total = 0;  // the spans so far: before_, checked in wide arithmetic
    for (std::size_t k = n; k-- > 0;) {  // backprop order
      order_.push_back(k);
      const Param& param = job_.param(k);
      const Wide span = param.shared_embedding
                            ? dp_ * pad_to(Wide{param.numel}, Wide{shard_divisor_})
                            : align_param_start(Wide{param.numel});
      total += span;
      if (total > size_limit) return false;
      span_.push_back(static_cast<Size>(span));
      prefix_.push_back(prefix_.back() * kHashBase + static_cast<std::uint64_t>(span_.back()));
      power_.push_back(power_.back() * kHashBase);
      before_.push_back(static_cast<Size>(total));
    }
    return plan_runs(limit);
  }

  /// The size of the planned buffer.
  Size size() const { return size_of(planned_); }

  /// Plans the runs between shared embeddings (plan's second half).
  bool plan_runs(Size limit) {
    const std::size_t n = span_.size();
    for (std::size_t i = 0; i < n;) {
      const bool shared = job_.param(order_[i]).shared_embedding;
      std::size_t end = i + 1;
      while (!shared && end < n && !job_.param(order_[end]).shared_embedding) ++end;
      const Size least_left = before_[n] - before_[end];  // what the params after need
      if (shared) {
        planned_.push_back({i, end, span(i), nullptr});
      } else if (!plan_run(i, end, limit - size() - least_left)) {
        return false;
      }
      if (size() + least_left > limit) return false;
      i = end;
    }
    return true;
  }

  /// Gives each planned bucket's bins to shards, keeping the heaviest shard's Newton-Schulz
  /// cost low: buckets with the costliest bins first, each bin costliest-first onto the
  /// least-loaded shard; then, while the heaviest shard is above `target`, the swap of two
  /// bins of one bucket that lightens it most. `load`: each shard's cost before (from the
  /// buffers planned before, whose ranks these share), and after. Returns the heaviest.
  Wide assign(Wide target, std::vector<Wide>& load) {
    const auto dp = static_cast<std::size_t>(dp_);
    bin_cost_.assign(planned_.size() * dp, 0);
    bin_on_shard_.assign(planned_.size() * dp, 0);
    std::pmr::vector<std::size_t> by_heaviest_bin(&arena_);
    by_heaviest_bin.reserve(planned_.size());
    for (std::size_t b = 0; b < planned_.size(); ++b) {
      Bucket& bucket = planned_[b];
      if (!bucket.fit) {  // a shared embedding: shard 0
        load[0] += cost_of(bucket.from);
        continue;
      }
      // The sizes are settled; at the same capacity, packing by cost balances the ranks.
      const std::optional<BinOf>& by_cost = pack_by_cost(bucket.from, bucket.to, bucket.size / dp_);
      bucket.bins = by_cost ? &*by_cost : &packed_bins(bucket);
      for (std::size_t q = bucket.from; q < bucket.to; ++q) {
        bin_cost_[b * dp + static_cast<std::size_t>((*bucket.bins)[q - bucket.from])] += cost_of(q);
      }
      by_heaviest_bin.push_back(b);
    }
    const auto heaviest_bin = [&](std::size_t b) {
      return *std::max_element(bin_cost_.begin() + b * dp, bin_cost_.begin() + (b + 1) * dp);
    };
    std::stable_sort(
        by_heaviest_bin.begin(), by_heaviest_bin.end(),
        [&](std::size_t a, std::size_t b) { return heaviest_bin(a) > heaviest_bin(b); });
    std::pmr::vector<std::size_t> bins(dp, &arena_);
    std::pmr::vector<std::size_t> shards(dp, &arena_);
    for (std::size_t b : by_heaviest_bin) {
      const Wide* cost = &bin_cost_[b * dp];
      for (std::size_t i = 0; i < dp; ++i) bins[i] = shards[i] = i;
      std::sort(bins.begin(), bins.end(), [&](std::size_t x, std::size_t y) {
        return cost[x] > cost[y] || (cost[x] == cost[y] && x < y);
      });
      std::sort(shards.begin(), shards.end(), [&](std::size_t x, std::size_t y) {
        return load[x] < load[y] || (load[x] == load[y] && x < y);
      });
      for (std::size_t i = 0; i < dp; ++i) {
        bin_on_shard_[b * dp + shards[i]] = static_cast<std::int64_t>(bins[i]);
        load[shards[i]] += cost[bins[i]];
      }
    }
    for (std::size_t swaps = 0; swaps < kMaxSwaps; ++swaps) {
      const std::size_t h = static_cast<std::size_t>(
          std::max_element(load.begin(), load.end()) - load.begin());
      if (load[h] <= target) break;
      Wide best = load[h];
      std::size_t best_bucket = 0;
      std::size_t best_shard = h;
      for (std::size_t b : by_heaviest_bin) {
        const Wide on_h = bin_cost_[b * dp + static_cast<std::size_t>(bin_on_shard_[b * dp + h])];
        for (std::size_t s = 0; s < dp; ++s) {
          const Wide on_s =
              bin_cost_[b * dp + static_cast<std::size_t>(bin_on_shard_[b * dp + s])];
          if (on_s >= on_h) continue;
          const Wide after = std::max(load[h] - on_h + on_s, load[s] - on_s + on_h);
          if (after < best) {
            best = after;
            best_bucket = b;
            best_shard = s;
          }
        }
      }
      if (best_shard == h) break;
      const std::size_t b = best_bucket;
      const Wide on_h = bin_cost_[b * dp + static_cast<std::size_t>(bin_on_shard_[b * dp + h])];
      const Wide on_s =
          bin_cost_[b * dp + static_cast<std::size_t>(bin_on_shard_[b * dp + best_shard])];
      load[h] += on_s - on_h;
      load[best_shard] += on_h - on_s;
      std::swap(bin_on_shard_[b * dp + h], bin_on_shard_[b * dp + best_shard]);
    }
    return *std::max_element(load.begin(), load.end());
  }

  /// Lays out the planned buckets as `assign` gave them to shards.
  void emit() {
    const auto dp = static_cast<std::size_t>(dp_);
    std::pmr::vector<std::int64_t> shard_of_bin(dp, &arena_);
    std::pmr::vector<std::size_t> by_start(span_.size(), &arena_);
    std::pmr::vector<std::size_t> shard_first(dp + 1, &arena_);
    for (std::size_t b = 0; b < planned_.size(); ++b) {
      const Bucket& bucket = planned_[b];
      if (!bucket.fit) {
        buckets_.shared_embedding(job_, order_[bucket.from]);
        continue;
      }
      for (std::size_t s = 0; s < dp; ++s) {
        shard_of_bin[static_cast<std::size_t>(bin_on_shard_[b * dp + s])] =
            static_cast<std::int64_t>(s);
      }
      // Placed by start: shard by shard, each shard's params in backprop order.
      const auto shard_of = [&](std::size_t q) {
        return static_cast<std::size_t>(shard_of_bin[(*bucket.bins)[q - bucket.from]]);
      };
      std::fill(shard_first.begin(), shard_first.end(), 0);
      Size numel = 0;
      for (std::size_t q = bucket.from; q < bucket.to; ++q) {
        ++shard_first[shard_of(q) + 1];
        numel += job_.param(order_[q]).numel;
      }
      for (std::size_t s = 0; s < dp; ++s) shard_first[s + 1] += shard_first[s];
      for (std::size_t q = bucket.from; q < bucket.to; ++q) {
        by_start[shard_first[shard_of(q)]++] = q;
      }
      const Size shard_size = bucket.size / dp_;
      std::size_t shard = dp;
      Size at = 0;
      for (std::size_t i = 0; i < bucket.to - bucket.from; ++i) {
        const std::size_t q = by_start[i];
        if (shard_of(q) != shard) {
          shard = shard_of(q);
          at = buckets_.start() + static_cast<Size>(shard) * shard_size;
        }
        out_.place(job_, order_[q], at, buckets_.id());
        at += span(q);
      }
      buckets_.close(shard_size, numel);
    }
  }

 private:
  /// The elements position `position` takes: its aligned numel, or for a shared embedding
  /// its whole bucket.
  Size span(std::size_t position) const { return span_[position]; }
  Wide cost_of(std::size_t position) const { return cost_[position]; }

  /// A question about packing positions [from, to) into dp bins: its answer depends only
  /// on `bound` and the params' spans (and, asked by cost, their costs) in order. Buckets of
  /// experts repeat these exactly, so each distinct bucket is packed once.
  struct Question {
    bool by_cost;
    Size bound;  ///< the least capacity, or by cost the capacity
    std::size_t from, to;
  };
  /// Hashes a question in O(1): a polynomial hash of the spans, from prefix sums.
  struct QuestionHash {
    const BalancedPacker* packer;
    std::size_t operator()(const Question& q) const {
      const std::uint64_t spans = packer->prefix_[q.to] - packer->prefix_[q.from] *
                                                              packer->power_[q.to - q.from];
      const auto bound = static_cast<std::uint64_t>(q.bound) * 0x9e3779b97f4a7c15u;
      return static_cast<std::size_t>(spans ^ bound ^ (bound >> 29) ^ q.by_cost);
    }
  };
  struct SameQuestion {
    const BalancedPacker* packer;
    bool operator()(const Question& a, const Question& b) const {
      if (a.by_cost != b.by_cost || a.bound != b.bound || a.to - a.from != b.to - b.from) {
        return false;
      }
      for (std::size_t i = 0; i < a.to - a.from; ++i) {
        if (packer->span(a.from + i) != packer->span(b.from + i)) return false;
        if (a.by_cost && packer->cost_of(a.from + i) != packer->cost_of(b.from + i)) return false;
      }
      return true;
    }
  };
  static constexpr std::uint64_t kHashBase = 0x100000001b3u;

  using BinOf = std::pmr::vector<std::int64_t>;  ///< the bin of each position of a bucket

  /// A capacity at which best-fit-decreasing packs a bucket, and its fullest bin there.
  struct Packed {
    Size capacity;
    Size fullest;
  };

  /// One bin's choice in fill_bins, taken by `repeat` bins in a row: of each size, how many.
  struct FilledBins {
    std::int64_t repeat;
    FillSearch::Counts take;
  };
  using Filling = std::pmr::vector<FilledBins>;  ///< fill_bins's packing, bin after bin

  /// The least capacity a bucket's search found, and how it packs there.
  struct Fit {
    Size capacity;
    std::optional<Filling> filling;  ///< where bin by bin (fill_bins), else best-fit
    std::optional<BinOf> bins;       ///< by position from the bucket's start, once asked
  };

  /// Positions [from, to) by decreasing span (ties in order), best-fit-decreasing's order,
  /// in runs of one span: a packing depends only on the spans and how many have each, so
  /// the positions themselves are only there when asked (sort_by_span), to place params.
  struct Items {
    struct Run {
      Size span;
      std::size_t first, end;  ///< ranks, into `positions` when it is there
    };
    explicit Items(std::pmr::memory_resource* arena) : positions(arena), runs(arena) {
      runs.reserve(kFewSpans);
    }
    std::size_t size() const { return runs.empty() ? 0 : runs.back().end; }
    std::pmr::vector<std::size_t> positions;
    std::pmr::vector<Run> runs;
    Size gcd = 0;  ///< of the spans: capacities between two of its multiples pack alike
  };
  /// Orders positions by decreasing span, ties by position.
  auto decreasing_span() const {
    return [this](std::size_t a, std::size_t b) {
      return span(a) > span(b) || (span(a) == span(b) && a < b);
    };
  }
  /// The runs of positions [from, to) into `items` (reused, to spare allocations). In a
  /// short run, a bucket of at least as many params as the run has spans is counted in the
  /// run's own order (sorted once, when a bucket of an eighth of it asks or the buckets
  /// sorted so far add up to it): each span's positions are in order there.
  const Items& by_decreasing_span(std::size_t from, std::size_t to, Items& items) {
    const std::size_t count = to - from;
    const std::size_t run = run_.second - run_.first;
    if (tighten_ && run_items_.positions.empty() && (count * 8 >= run || sorted_ >= run)) {
      sort_by_span(run_.first, run_.second, run_items_);
    }
    if (run_items_.positions.empty() || run_items_.runs.size() > count) {
      sorted_ += count;
      sort_by_span(from, to, items);
      return items;
    }
    items.positions.clear();
    items.runs.clear();
    const auto positions = run_items_.positions.begin();
    std::size_t at = 0;
    for (const Items::Run& run : run_items_.runs) {
      const auto first = std::lower_bound(positions + run.first, positions + run.end, from);
      const auto end = std::lower_bound(first, positions + run.end, to);
      if (first == end) continue;
      items.runs.push_back({run.span, at, at + static_cast<std::size_t>(end - first)});
      at = items.runs.back().end;
    }
    items.gcd = gcd_of(items.runs);
    return items;
  }
  static Size gcd_of(const std::pmr::vector<Items::Run>& runs) {
    Size gcd = 0;
    for (const Items::Run& run : runs) {
      for (Size a = run.span; a != 0;) gcd = std::exchange(a, gcd % a);
    }
    return gcd;
  }
  void sort_by_span(std::size_t from, std::size_t to, Items& items) {
    items.positions.clear();
    items.runs.clear();
    if (sort_few_spans(from, to, items)) return;
    for (std::size_t q = from; q < to; ++q) items.positions.push_back(q);
    std::sort(items.positions.begin(), items.positions.end(), decreasing_span());
    for (std::size_t i = 0; i < items.positions.size(); ++i) {
      const Size size = span(items.positions[i]);
      if (items.runs.empty() || items.runs.back().span != size) items.runs.push_back({size, i, i});
      ++items.runs.back().end;
    }
    items.gcd = gcd_of(items.runs);
  }

  /// sort_by_span where positions [from, to) have at most kFewSpans spans (most buckets).
  bool sort_few_spans(std::size_t from, std::size_t to, Items& items) {
    const auto span_of = [this](std::size_t q) { return span(q); };
    const auto group = [&](Size size, std::size_t first, std::size_t end) {
      items.runs.push_back({size, first, end});
    };
    if (!order_by_kind(from, to, span_of, std::greater<>(), items.positions, group)) return false;
    items.gcd = gcd_of(items.runs);
    return true;
  }

  /// Positions [from, to) into `out` by kind, the kinds ordered by `before`, each kind's
  /// positions in order, when they are of at most kFewSpans kinds (`kind_of(q)`, told apart
  /// by ==): each position goes straight to its kind's place, with no comparisons between
  /// positions. Calls `group(kind, first, end)` for each kind's range, in order; false when
  /// there are more kinds (and `out` is left as it was).
  template <class KindOf, class Before, class Group>
  bool order_by_kind(std::size_t from, std::size_t to, KindOf kind_of, Before before,
                     std::pmr::vector<std::size_t>& out, Group group) {
    using Kind = decltype(kind_of(from));
    std::array<Kind, kFewSpans> kinds;
    std::array<std::size_t, kFewSpans> count{};
    std::size_t found = 0;
    std::size_t last = 0;
    kind_index_.resize(to - from);
    for (std::size_t q = from; q < to; ++q) {
      const Kind kind = kind_of(q);
      if (last >= found || !(kinds[last] == kind)) {
        last = 0;
        while (last < found && !(kinds[last] == kind)) ++last;
        if (last == found) {
          if (found == kFewSpans) return false;
          kinds[found++] = kind;
        }
      }
      ++count[last];
      kind_index_[q - from] = static_cast<std::uint8_t>(last);
    }
    std::array<std::uint8_t, kFewSpans> order;  // into `kinds`, first to last
    for (std::size_t k = 0; k < found; ++k) order[k] = static_cast<std::uint8_t>(k);
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(found),
              [&](std::uint8_t a, std::uint8_t b) { return before(kinds[a], kinds[b]); });
    std::array<std::size_t, kFewSpans> next;  // where each kind's next position goes
    for (std::size_t k = 0, at = 0; k < found; ++k) {
      next[order[k]] = at;
      group(kinds[order[k]], at, at + count[order[k]]);
      at += count[order[k]];
    }
    out.resize(to - from);
    for (std::size_t q = from; q < to; ++q) out[next[kind_index_[q - from]]++] = q;
    return true;
  }

  /// Best-fit-decreasing of `items` (from `by_decreasing_span`) into dp bins of `capacity`:
  /// what the fullest bin holds, or nothing when an item finds no room. With `bin_of`, also
  /// the bin of each item, by its position from `from`.
  std::optional<Size> best_fit(const Items& items, Size capacity, std::size_t from = 0,
                               BinOf* bin_of = nullptr) {
    bins_.reset(dp_, capacity);
    for (const Items::Run& run : items.runs) {
      std::size_t i = run.first;
      const bool placed = bins_.put(run.span, static_cast<std::int64_t>(run.end - run.first),
                                    [&](std::int64_t first, std::int64_t count, std::int64_t n) {
                                      if (!bin_of) return;
                                      for (std::int64_t b = first; b < first + count; ++b) {
                                        for (std::int64_t k = 0; k < n; ++k, ++i) {
                                          (*bin_of)[items.positions[i] - from] = b;
                                        }
                                      }
                                    });
      if (!placed) return std::nullopt;
    }
    return bins_.fullest();
  }

  /// Fills dp bins of `capacity` one at a time (minimum bin slack): each takes the largest
  /// item left and the items that fill it best, found by a bounded search over the sizes.
  /// Where few sizes repeat (transformer layers), this packs tighter than best-fit, which
  /// spreads the large items first. A bin's best choice stays best for the next bins while
  /// its items last, so each is searched once. Like `best_fit`: the fullest bin or nothing;
  /// `filling` takes the bins' choices. For `items` of at most kFillSizeLimit sizes.
  std::optional<Size> fill_bins(const Items& items, Size capacity, Filling& filling) {
    FillSearch& f = fill_;
    filling.clear();
    const std::size_t n = f.sizes = items.runs.size();
    Size slack = dp_ * capacity;  // what the bins can leave empty and still take every item
    for (std::size_t i = 0; i < n; ++i) {
      const Items::Run& run = items.runs[i];
      f.span[i] = run.span;
      f.left[i] = static_cast<std::int64_t>(run.end - run.first);
      slack -= run.span * f.left[i];
    }
    if (slack < 0) return std::nullopt;  // and so every sum below fits
    f.after[n] = 0;
    Size fullest = 0;
    std::size_t first = 0;  // the largest size with items left
    for (std::int64_t bin = 0; bin < dp_;) {
      while (first < n && f.left[first] == 0) ++first;
      if (first == n) break;
      if (f.span[first] > capacity) return std::nullopt;
      for (std::size_t i = n; i-- > first;) f.after[i] = f.after[i + 1] + f.span[i] * f.left[i];
      --f.left[first];  // the bin's first item: the largest left
      f.room = capacity - f.span[first];
      f.reach = f.room - f.room % items.gcd;
      f.best_fill = -1;
      f.steps = kFillSteps;
      f.search(first);
      ++f.left[first];
      ++f.best[first];
      fullest = std::max(fullest, Size{f.span[first] + f.best_fill});
      std::int64_t repeat = dp_ - bin;
      for (std::size_t i = first; i < n; ++i) {
        if (f.best[i] > 0) repeat = std::min(repeat, f.left[i] / f.best[i]);
      }
      for (std::size_t i = first; i < n; ++i) f.left[i] -= repeat * f.best[i];
      filling.push_back({repeat, f.best});
      bin += repeat;
      slack -= repeat * (f.room - f.best_fill);
      if (slack < 0) return std::nullopt;
    }
    while (first < n && f.left[first] == 0) ++first;
    if (first < n) return std::nullopt;
    return fullest;
  }

  /// Positions [from, to) into `items` by decreasing cost, then span (ties in order), when
  /// they have at most kFewSpans (cost, span) pairs (most buckets).
  bool by_decreasing_cost(std::size_t from, std::size_t to, std::pmr::vector<std::size_t>& items) {
    const auto kind_of = [this](std::size_t q) { return std::pair{cost_[q], span(q)}; };
    return order_by_kind(from, to, kind_of, std::greater<>(), items, [](auto&&...) {});
  }

  /// Positions [from, to) into dp bins of `capacity` by Newton-Schulz cost: the costliest
  /// item to the cheapest bin it fits in, which balances the optimizer's work. The bin of
  /// each position, or nothing when an item finds no room (or dp is too large to try).
  std::optional<BinOf> cost_fit(std::size_t from, std::size_t to, Size capacity) {
    if (dp_ > kCostAwareLimit) return std::nullopt;
    std::pmr::vector<std::size_t> items(to - from, &arena_);
    if (!by_decreasing_cost(from, to, items)) {
      for (std::size_t q = from; q < to; ++q) items[q - from] = q;
      std::sort(items.begin(), items.end(), [&](std::size_t a, std::size_t b) {
        if (cost_[a] != cost_[b]) return cost_[a] > cost_[b];
        return span(a) > span(b) || (span(a) == span(b) && a < b);
      });
    }
    Wide total = 0;
    for (std::size_t q = from; q < to; ++q) total += cost_[q];  // below 2^127 (plan)
    if (total <= std::numeric_limits<std::int64_t>::max()) {
      return cost_fit_by<std::int64_t>(items, from, capacity);
    }
    return cost_fit_by<Wide>(items, from, capacity);
  }
  /// cost_fit's packing of `items` (costliest first), with loads summed as `Load`.
  template <class Load>
  std::optional<BinOf> cost_fit_by(const std::pmr::vector<std::size_t>& items, std::size_t from,
                                   Size capacity) {
    BinOf bin_of(items.size(), &arena_);
    std::pmr::vector<Size> room(static_cast<std::size_t>(dp_), capacity, &arena_);
    std::pmr::vector<Load> load(static_cast<std::size_t>(dp_), 0, &arena_);
    for (std::size_t q : items) {
      const Size need = span(q);
      std::int64_t best = -1;
      Load least = static_cast<Load>(  // above every load: they sum below it
          std::is_same_v<Load, Wide> ? kWideMax : Wide{std::numeric_limits<std::int64_t>::max()});
      for (std::int64_t bin = 0; bin < dp_; ++bin) {
        if (room[bin] >= need && load[bin] < least) {
          least = load[bin];
          best = bin;
        }
      }
      if (best < 0) return std::nullopt;
      room[best] -= need;
      load[best] += static_cast<Load>(cost_[q]);
      bin_of[q - from] = best;
    }
    return bin_of;
  }

  /// About the smallest capacity (within 1/kResolution) from max(`at_least`, the largest
  /// param, total / dp) up at which best-fit-decreasing packs positions [from, to).
  /// `hint`: where best-fit is known to pack them, the search's start (no gallop below).
  Fit& smallest_fit(std::size_t from, std::size_t to, Size at_least, const Packed& hint = {}) {
    const Question question{false, at_least, from, to};
    auto found = fits_.find(question);
    if (found == fits_.end()) {
      found = fits_.emplace(question, search_smallest_fit(from, to, at_least, hint)).first;
    }
    return found->second;
  }

  /// Packs positions [from, to) into bins of `capacity` by cost, when that places them all.
  const std::optional<BinOf>& pack_by_cost(std::size_t from, std::size_t to, Size capacity) {
    const Question question{true, capacity, from, to};
    auto found = by_cost_.find(question);
    if (found == by_cost_.end()) {
      found = by_cost_.emplace(question, cost_fit(from, to, capacity)).first;
    }
    return found->second;
  }

  /// The least capacity that could hold a bucket of `total` elements whose largest param
  /// spans `largest`: no packing of it does better.
  Size lowest_capacity(Size total, Size largest) const {
    return pad_to(std::max(largest, (total + dp_ - 1) / dp_), Size{shard_divisor_});
  }

  /// The least capacity, at least `at_least`, that could hold `items`: the largest, their
  /// total over dp, and since of the k*dp + 1 largest some bin holds k + 1, at least the
  /// k + 1 smallest of those. No packing does better; `smallest_fit` starts here.
  Size least_capacity(const Items& items, Size at_least) const {
    Size total = 0;
    for (const Items::Run& run : items.runs) {
      total += run.span * static_cast<Size>(run.end - run.first);
    }
    const std::size_t count = items.size();
    Size crowded = 0;
    auto run = items.runs.begin();  // the run of the i-th largest, i rising
    for (std::size_t k = 1, dp = static_cast<std::size_t>(dp_); k * dp < count; ++k) {
      Size smallest_k = 0;  // items [k*dp - k, k*dp]
      for (std::size_t i = k * dp - k; i <= k * dp; ++i) {
        while (run->end <= i) ++run;
        smallest_k += run->span;
      }
      crowded = std::max(crowded, smallest_k);
      if (k * k > count) break;  // enough: the bound flattens, the sums lengthen
    }
    const Size largest = items.runs.empty() ? 0 : items.runs.front().span;
    return std::max({pad_to(at_least, Size{shard_divisor_}), lowest_capacity(total, largest),
                     pad_to(crowded, Size{shard_divisor_})});
  }

  /// Whether `fill_bins` applies to `items`: few shards, at most kFillSizeLimit distinct spans.
  bool can_fill(const Items& items) const {
    return dp_ <= kFillShardLimit && items.runs.size() <= kFillSizeLimit;
  }

  Fit search_smallest_fit(std::size_t from, std::size_t to, Size at_least, const Packed& hint) {
    const Items& items = by_decreasing_span(from, to, search_items_);
    const Size lowest = least_capacity(items, at_least);
    // Gallop up from `lowest` (or the hint) to a capacity that packs, then bisect down to
    // within 1/kResolution of the smallest one that does; a packing at one capacity also
    // holds at its fullest bin's (padded), which is where the search goes on from.
    // A capacity that fails fails up to the next multiple of the spans' gcd, where only the
    // room no span can use grows.
    const auto failing = [&](Size c) { return c - c % items.gcd + items.gcd - 1; };
    Size failed = lowest - 1;
    std::optional<Size> fill = hint.capacity > lowest ? std::optional{hint.fullest} : std::nullopt;
    if (!fill) fill = best_fit(items, lowest);
    Size step = std::max<Size>(lowest / 256, shard_divisor_);
    Size capacity = lowest;
    while (!fill) {
      failed = failing(capacity);
      do {  // no need to try where it surely fails
        capacity = pad_to(lowest + step, Size{shard_divisor_});
        step *= 2;
      } while (capacity <= failed);
      fill = best_fit(items, capacity);
    }
    capacity = pad_to(*fill, Size{shard_divisor_});
    const Size resolution = std::max<Size>(lowest / kResolution, shard_divisor_);
    // Narrows (failed, capacity] with `pack`; true when it packed below `capacity`.
    const auto bisect = [&](auto pack) {
      bool packed = false;
      while (capacity - failed > resolution) {
        const Size middle = pad_to(failed + (capacity - failed) / 2, Size{shard_divisor_});
        if (middle >= capacity) break;
        if (std::optional<Size> tighter = pack(middle)) {
          capacity = pad_to(*tighter, Size{shard_divisor_});
          packed = true;
        } else {
          failed = failing(middle);
        }
      }
      return packed;
    };
    bisect([&](Size c) { return best_fit(items, c); });
    // Bin-by-bin filling can pack below best-fit's capacity: bisect once more with it,
    // unless it cannot pack just below that capacity either (most buckets).
    // The packing kept is the last that packed: the capacity is its fullest bin's.
    std::optional<Filling> filling;
    if (tighten_ && capacity > lowest && can_fill(items)) {
      if (std::optional<Size> tighter = fill_bins(items, capacity - shard_divisor_, trial_)) {
        capacity = pad_to(*tighter, Size{shard_divisor_});
        failed = lowest - 1;
        filling.emplace(trial_, &arena_);
        bisect([&](Size c) {
          std::optional<Size> fullest = fill_bins(items, c, trial_);
          if (fullest) filling->assign(trial_.begin(), trial_.end());
          return fullest;
        });
      }
    }
    return {capacity, std::move(filling), std::nullopt};
  }

  /// Plans buckets for the params at positions [from, end) (no shared embedding among them)
  /// in at most `budget` elements; false when they do not fit in it.
  bool plan_run(std::size_t from, std::size_t end, Size budget) {
    tighten_ = search_ && end - from <= kLongRun;
    run_ = {from, end};
    run_largest_ = *std::max_element(span_.begin() + static_cast<std::ptrdiff_t>(from),
                                     span_.begin() + static_cast<std::ptrdiff_t>(end));
    run_items_.positions.clear();
    run_items_.runs.clear();
    sorted_ = 0;
    const std::optional<std::int64_t>& bucket_size = job_.options.bucket_size;
    if (!bucket_size) {
      Fit& fit = smallest_fit(from, end, 0);
      planned_.push_back({from, end, fit.capacity * dp_, &fit});
      return fit.capacity * dp_ <= budget;
    }
    // How many buckets: greedily, each takes params while they fit dp shards of
    // max(bucket_size / dp, its largest param).
    const Wide least_shard = (Wide{*bucket_size} + dp_ - 1) / dp_;
    if (dp_ * least_shard > budget) return false;  // no bucket can be that small
    const auto target = static_cast<Size>(least_shard);
    std::size_t buckets = 0;
    for (std::size_t q = from; q < end;) {
      Size largest = 0;
      Size total = 0;
      for (; q < end; ++q) {
        const Size next_largest = std::max(largest, span(q));
        if (total > 0 && total + span(q) > dp_ * std::max(target, next_largest)) break;
        largest = next_largest;
        total += span(q);
      }
      ++buckets;
    }
    // Then cut the run into that many buckets of about equal totals, so that the last is
    // as full as the others, each with the smallest shards that hold it. A few buckets
    // fewer (larger) can pad much less when the largest params set the shard size; the
    // count with the least padding wins (bucket_size is a soft target).
    // Long runs (thousands of experts) try fewer counts, to keep planning fast.
    const bool long_run = end - from > kLongRun;
    std::pmr::vector<std::size_t> counts(&arena_);
    counts.reserve(8);  // at most three counts near the greedy one and five fractions of it
    for (std::size_t fewer = 0; fewer <= (long_run ? 1 : 2) && fewer < buckets; ++fewer) {
      counts.push_back(buckets - fewer);
    }
    for (int percent = 50; percent < 100; percent += long_run ? 25 : 10) {
      counts.push_back(std::max<std::size_t>(1, buckets * static_cast<std::size_t>(percent) / 100));
    }
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    // From the fewest buckets up (fewer usually pad less, which rules more counts out
    // early); the least padding wins, and on a tie the most buckets.
    Buckets best(&arena_);
    for (std::size_t count : counts) {
      const Size beat = best.empty() ? budget + 1 : size_of(best) + 1;
      std::optional<Buckets> option = cut(from, end, count, target, beat);
      if (option) best = std::move(*option);
    }
    if (best.empty()) return false;
    if (tighten_) refine_cuts(best, target);
    planned_.insert(planned_.end(), best.begin(), best.end());
    return true;
  }

  /// Positions [from, to) in one bucket of `size` (dp * shard size) elements, as `fit`
  /// found them (owned by the memo), their bins once `assign` chose them; a shared embedding
  /// alone when `fit` is null.
  struct Bucket {
    std::size_t from = 0;
    std::size_t to = 0;
    Size size = 0;
    Fit* fit = nullptr;
    const BinOf* bins = nullptr;
  };

  using Buckets = std::pmr::vector<Bucket>;

  static Size size_of(const Buckets& buckets) {
    Size size = 0;
    for (const Bucket& b : buckets) size += b.size;
    return size;
  }

  /// The bin of each param of `bucket` at its capacity, as its search packed them; made
  /// when first asked (most buckets lose, or are packed by cost instead).
  const BinOf& packed_bins(const Bucket& bucket) {
    Fit& fit = *bucket.fit;
    if (!fit.bins) {
      Items& items = search_items_;
      sort_by_span(bucket.from, bucket.to, items);  // not by_decreasing_span: any run's bucket
      BinOf& bin_of = fit.bins.emplace(bucket.to - bucket.from, &arena_);
      if (!fit.filling) {
        best_fit(items, fit.capacity, bucket.from, &bin_of);
        return *fit.bins;
      }
      std::array<std::size_t, kFillSizeLimit> next;  // of each size, the next item to place
      for (std::size_t i = 0; i < items.runs.size(); ++i) next[i] = items.runs[i].first;
      std::int64_t bin = 0;
      for (const FilledBins& bins : *fit.filling) {
        for (std::int64_t r = 0; r < bins.repeat; ++r, ++bin) {
          for (std::size_t i = 0; i < items.runs.size(); ++i) {
            for (std::int64_t k = 0; k < bins.take[i]; ++k) {
              bin_of[items.positions[next[i]++] - bucket.from] = bin;
            }
          }
        }
      }
    }
    return *fit.bins;
  }

  /// Positions [from, end) in `count` buckets of about equal totals, each with the smallest
  /// shards that hold it; nothing when they cannot come to fewer than `beat` elements.
  std::optional<Buckets> cut(std::size_t from, std::size_t end, std::size_t count, Size target,
                             Size beat) {
    const Size run_total = before_[end] - before_[from];
    Buckets out(&arena_);
    out.reserve(count);
    std::pmr::vector<Size>& lowest = lowest_;  // each bucket's least size, to give up early
    lowest.clear();
    Size lowest_left = 0;
    for (std::size_t k = 1, q = from; k <= count && q < end; ++k) {
      // The cut nearest the goal: past each param that ends by it, and past the next one too
      // where that ends nearer (and past one at least).
      std::size_t to = end;
      if (k < count) {
        const Size goal =
            before_[from] + static_cast<Size>(Wide{run_total} * Wide{k} / Wide{count});
        to = static_cast<std::size_t>(
            std::upper_bound(before_.begin() + q + 1, before_.begin() + end + 1, goal) -
            before_.begin() - 1);
        if (to < end && (to == q || goal - before_[to] > before_[to + 1] - goal)) ++to;
      }
      const Size total = before_[to] - before_[q];
      Size least = lowest_capacity(total, 0);
      if (least < run_largest_) {  // else no span of the bucket can raise it
        Size largest = 0;
        for (std::size_t p = q; p < to; ++p) largest = std::max(largest, span(p));
        least = lowest_capacity(total, largest);
      }
      out.push_back({q, to, 0, nullptr});
      lowest.push_back(dp_ * least);
      lowest_left += lowest.back();
      if (lowest_left >= beat) return std::nullopt;
      q = to;
    }
    Size size = 0;
    for (std::size_t b = 0; b < out.size(); ++b) {
      if (size + lowest_left >= beat) return std::nullopt;
      Fit& fit = smallest_fit(out[b].from, out[b].to, target);
      out[b].size = fit.capacity * dp_;
      out[b].fit = &fit;
      size += out[b].size;
      lowest_left -= lowest[b];
    }
    if (size >= beat) return std::nullopt;
    return out;
  }

  /// Moves each cut between two buckets by up to kCutShift params either way, where that
  /// makes the pair smaller: equal totals are a good start, but the sizes of the params
  /// decide which cut packs best.
  void refine_cuts(Buckets& out, Size target) {
    for (std::size_t b = 0; b + 1 < out.size(); ++b) {
      Bucket& left = out[b];
      Bucket& right = out[b + 1];
      const std::size_t cut = left.to;
      // Cuts within reach, each side's least capacity for each (one pass over the pair).
      const std::size_t first = cut - std::min(cut - left.from - 1, kCutShift);
      const std::size_t last = std::min(cut + kCutShift, right.to - 1);
      std::array<Size, 2 * kCutShift + 1> lowest_before{};  // by cut - first
      std::array<Size, 2 * kCutShift + 1> lowest_after{};
      Size total = 0;
      Size largest = 0;
      for (std::size_t q = left.from; q < last; ++q) {
        total += span(q);
        largest = std::max(largest, span(q));
        if (q + 1 >= first) lowest_before[q + 1 - first] = lowest_capacity(total, largest);
      }
      total = largest = 0;
      for (std::size_t q = right.to; q-- > first;) {
        total += span(q);
        largest = std::max(largest, span(q));
        if (q <= last) lowest_after[q - first] = lowest_capacity(total, largest);
      }
      std::size_t best_cut = cut;
      Size best = left.size + right.size;
      if (best == dp_ * (lowest_before[cut - first] + lowest_after[cut - first])) continue;
      for (std::size_t shift = 1; shift <= kCutShift; ++shift) {
        for (const std::size_t at : {cut - shift, cut + shift}) {
          if (at < first || at > last) continue;  // also a cut - shift below 0
          // A move gains at most what its buckets' lower bounds leave; one that cannot gain
          // more than the capacity search resolves is not tried.
          const Size left_lowest = lowest_before[at - first];
          const Size right_lowest = lowest_after[at - first];
          if (dp_ * (left_lowest + right_lowest) + best / kResolution >= best) continue;
          // Most moves cannot win: best-fit on each side at the largest capacity that could
          // tells (bin-by-bin filling would tell a little more, at far more cost).
          // The right side first: it fails more often.
          const Size room = best / dp_ - right_lowest;
          if (room < target) continue;
          const Items& right_items = by_decreasing_span(at, right.to, right_items_);
          const Size right_room = best / dp_ - std::max(left_lowest, target) - shard_divisor_;
          if (!best_fit(right_items, right_room)) continue;
          const std::optional<Size> left_fullest =
              best_fit(by_decreasing_span(left.from, at, left_items_), room);
          if (!left_fullest) continue;
          const Size left_size =
              dp_ * smallest_fit(left.from, at, target, {room, *left_fullest}).capacity;
          if (left_size + dp_ * right_lowest >= best) continue;
          if (!best_fit(right_items, (best - left_size) / dp_ - shard_divisor_)) continue;
          const Size size = left_size + dp_ * smallest_fit(at, right.to, target).capacity;
          if (size < best) {
            best = size;
            best_cut = at;
          }
        }
      }
      if (best_cut == cut) continue;
      left.to = right.from = best_cut;
      for (Bucket* bucket : {&left, &right}) {
        Fit& fit = smallest_fit(bucket->from, bucket->to, target);
        bucket->size = fit.capacity * dp_;
        bucket->fit = &fit;
      }
    }
  }

  /// What the packer allocates, freed at once with it: planning makes and drops many small
  /// vectors (buckets, bins, sorted params), each cheaper to use than the heap makes it.
  std::pmr::monotonic_buffer_resource arena_{kArenaStart};
  const BufferJob& job_;
  BufferBuilder& out_;
  const bool search_;
  bool tighten_ = false;  ///< search_, in the run being planned, unless a long one
  const std::int64_t dp_;
  const std::int64_t shard_divisor_;
  std::pmr::vector<std::size_t> order_{&arena_};  ///< param indices in backprop order
  std::pmr::vector<Wide> cost_{&arena_};  ///< Newton-Schulz cost by position
  std::pmr::vector<Size> span_{&arena_};  ///< aligned numel by position
  Buckets planned_{&arena_};
  std::pair<std::size_t, std::size_t> run_;  ///< the run being planned
  Size run_largest_ = 0;                      ///< its largest span
  Items run_items_{&arena_};  ///< its params by decreasing span, once asked
  std::pmr::vector<Size> lowest_{&arena_};  ///< cut's, reused
  std::size_t sorted_ = 0;                    ///< params sorted for its buckets, till then
  std::pmr::vector<std::uint8_t> kind_index_{&arena_};  ///< order_by_kind's, reused
  Items search_items_{&arena_}, left_items_{&arena_}, right_items_{&arena_};  ///< reused
  Bins bins_{&arena_};  ///< best_fit's, reused
  FillSearch fill_;  ///< fill_bins's, reused
  Filling trial_{&arena_};  ///< the packing of fill_bins's last call
  std::pmr::vector<std::uint64_t> prefix_{&arena_};  ///< hash of the spans before each position
  std::pmr::vector<std::uint64_t> power_{&arena_};   ///< kHashBase to the power of each length
  std::pmr::vector<Size> before_{&arena_};  ///< the spans before each position, in all
  std::pmr::unordered_map<Question, Fit, QuestionHash, SameQuestion> fits_{
      64, QuestionHash{this}, SameQuestion{this}, &arena_};
  std::pmr::unordered_map<Question, std::optional<BinOf>, QuestionHash, SameQuestion> by_cost_{
      64, QuestionHash{this}, SameQuestion{this}, &arena_};
  std::pmr::vector<Wide> bin_cost_{&arena_};              ///< by planned bucket, then bin
  std::pmr::vector<std::int64_t> bin_on_shard_{&arena_};  ///< by planned bucket, then shard
  LayerwiseBuckets buckets_;
};

}  // namespace

Result<void> lay_out_layerwise_balanced(const BufferJob& job, BufferBuilder& out,
                                        RankCosts& ranks) {
  // Megatron-LM's packing first: the balanced one is kept only where it is no worse in
  // padding and in the heaviest rank's Newton-Schulz cost (over this shard count's buffers
  // so far), so `balanced` never loses. The tighter search goes first; where its ranks come
  // out heavier, plain best-fit next.
  Result<std::vector<Wide>> cost = newton_schulz_costs(job);
  if (!cost) return cost.error();
  Result<MegatronPacking> greedy = MegatronPacking::pack(job, *cost);
  if (!greedy) return greedy.error();
  const std::vector<Wide> greedy_costs = greedy->rank_costs();
  const auto dp = static_cast<std::size_t>(job.group.num_shards);
  const auto add = [dp](std::vector<Wide>& into, const std::vector<Wide>& costs) {
    into.resize(dp, 0);
    for (std::size_t s = 0; s < dp; ++s) into[s] = saturating_add(into[s], costs[s]);
  };
  add(ranks.megatron, greedy_costs);
  ranks.kept.resize(dp, 0);
  const Wide target = *std::max_element(ranks.megatron.begin(), ranks.megatron.end());
  // With the heaviest rank's cost so far, this buffer's must leave assign's sums in 127 bits.
  Wide total = 0;
  for (const Wide c : greedy_costs) total = saturating_add(total, c);
  const Wide kept_heaviest = *std::max_element(ranks.kept.begin(), ranks.kept.end());
  if (saturating_add(kept_heaviest, total) < kWideMax) {
    for (const bool search : {true, false}) {
      BalancedPacker packer(job, out, search);  // writes only in emit
      std::vector<Wide> load = ranks.kept;
      if (!packer.plan(*cost, greedy->size()) || packer.assign(target, load) > target) continue;
      packer.emit();  // as assign gave the bins to shards
      ranks.kept = std::move(load);
      return {};
    }
  }
  add(ranks.kept, greedy_costs);
  greedy->write(out);
  return {};
}

}  // namespace paramlayout::strategies
