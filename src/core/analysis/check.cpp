#include "paramlayout/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "paramlayout/plan.hpp"

namespace paramlayout {
namespace {

std::string optional_text(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("null");
}

std::string quoted(std::string_view name) { return "\"" + excerpt(name) + "\""; }

/// Where each param of the layout is, by name.
struct SlotRef {
  std::size_t buffer;
  std::size_t slot;
};

/// What the params of one bucket add up to, for its numel_unpadded.
struct BucketTally {
  std::int64_t params = 0;
  std::int64_t param_numel = 0;
  bool numel_overflows = false;  ///< overlapping params add up past 64 bits
  std::int64_t last_end = 0;
  std::size_t first_slot = SIZE_MAX;
};

/// Checks one layout; with a manifest, also every promise that needs it. Never indexes or
/// computes with a figure before it is known to be in range.
class Checker {
 public:
  Checker(const Layout& layout, const Manifest* manifest) : layout_(layout), manifest_(manifest) {
    if (manifest_ == nullptr) return;
    manifest_position_.reserve(manifest_->params.size());
    for (std::size_t i = 0; i < manifest_->params.size(); ++i) {
      manifest_position_.emplace(manifest_->params[i].name, i);
    }
  }

  std::vector<Violation> run() {
    if (manifest_ != nullptr && layout_.manifest_sha256 != manifest_->sha256) {
      add("", fmt::format("was planned from another manifest (manifest_sha256 {}, this "
                          "manifest's {}); the rest is checked by name",
                          abbreviate(layout_.manifest_sha256), abbreviate(manifest_->sha256)));
    }
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) check_buffer(i);
    check_names();
    check_buffer_keys();
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) check_param_buffer(i);
    return std::move(violations_);
  }

 private:
  static std::string abbreviate(const std::string& sha) {
    return sha.size() > 12 ? excerpt(sha.substr(0, 12)) + "..." : excerpt(sha);
  }

  void add(std::string where, std::string what) {
    violations_.push_back({std::move(where), std::move(what)});
  }

  std::string at(std::size_t i, std::optional<std::int64_t> bucket = std::nullopt,
                 std::string_view param = {}) const {
    std::string out = fmt::format("buffer {} ({})", i, describe(layout_.buffers[i].key));
    if (bucket) out += fmt::format(", bucket {}", *bucket);
    if (!param.empty()) out += ", param " + quoted(param);
    return out;
  }

  const Param* manifest_param(std::string_view name) const {
    auto it = manifest_position_.find(name);
    return it == manifest_position_.end() ? nullptr : &manifest_->params[it->second];
  }

  void check_buffer(std::size_t i) {
    check_strategy_and_shards(i);
    check_buckets(i);
    std::vector<BucketTally> tallies(layout_.buffers[i].buckets.size());
    check_params(i, tallies);
    check_numel_unpadded(i, tallies);
    if (manifest_ != nullptr) check_backprop_order(i);
  }

  void check_strategy_and_shards(std::size_t i) {
    const BufferLayout& b = layout_.buffers[i];
    const PlanOptions& o = layout_.options;
    const Strategy expected_strategy = strategy_for(b.key, o);
    if (b.strategy != expected_strategy) {
      add(at(i), fmt::format("strategy is {}, the recorded options give {}", to_string(b.strategy),
                             to_string(expected_strategy)));
    }
    const std::optional<std::int64_t> expected_shards =
        expected_strategy == Strategy::unpadded
            ? std::nullopt
            : std::optional<std::int64_t>(b.key.expert_parallel ? o.expert_dp : o.dp);
    if (b.num_shards != expected_shards) {
      add(at(i), fmt::format("num_shards is {}, expected {} ({})", optional_text(b.num_shards),
                             optional_text(expected_shards),
                             !expected_shards        ? "unpadded buffers are not sharded"
                             : b.key.expert_parallel ? "options.expert_dp"
                                                     : "options.dp"));
    }
  }

  bool sharded(const BufferLayout& b) const {
    return b.strategy != Strategy::unpadded && b.num_shards.has_value() && *b.num_shards >= 1;
  }

  // Buckets: contiguous from 0, non-empty, sizes divisible as the strategy requires.
  void check_buckets(std::size_t i) {
    const BufferLayout& b = layout_.buffers[i];
    const PlanOptions& o = layout_.options;
    std::int64_t expected_start = 0;
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const BucketRange& bucket = b.buckets[j];
      const auto id = static_cast<std::int64_t>(j);
      if (bucket.start != expected_start) {
        add(at(i, id), fmt::format("starts at {}, expected {} ({})", bucket.start, expected_start,
                                   j == 0 ? "the buffer's start" : "the previous bucket's end"));
      }
      if (bucket.start < 0 || bucket.end <= bucket.start) {
        add(at(i, id), fmt::format("is empty or reversed: [{}, {})", bucket.start, bucket.end));
      } else if (sharded(b)) {
        const std::int64_t divisor = bucket_divisor(*b.num_shards, o.pad_for_high_nccl_busbw);
        if (bucket.size() % divisor != 0) {
          add(at(i, id), fmt::format("size {} is not a multiple of {} (bucket_divisor({}){})",
                                     bucket.size(), divisor, *b.num_shards,
                                     o.pad_for_high_nccl_busbw ? " with high-busbw padding" : ""));
        }
      }
      expected_start = bucket.end;
    }
    const std::int64_t expected_numel = b.buckets.empty() ? 0 : b.buckets.back().end;
    if (b.numel != expected_numel) {
      add(at(i),
          fmt::format("numel is {}, but the last bucket ends at {}", b.numel, expected_numel));
    }
  }

  /// True when `bucket` is one the params may be placed in: well-formed, and cut into
  /// shards of at least one element where the buffer is sharded.
  bool usable(const BufferLayout& b, const BucketRange& bucket) const {
    if (bucket.start < 0 || bucket.end <= bucket.start) return false;
    return !sharded(b) || bucket.size() % *b.num_shards == 0;
  }

  // Params: sorted, inside their bucket, aligned, disjoint, whole inside one shard.
  void check_params(std::size_t i, std::vector<BucketTally>& tallies) {
    const BufferLayout& b = layout_.buffers[i];
    const bool aligned = b.strategy != Strategy::unpadded;
    std::int64_t covered_until = 0;
    std::string_view covered_by;
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const ParamSlot& p = b.params[k];
      if (k > 0 && p.start < b.params[k - 1].start) {
        add(at(i, p.bucket, p.name), fmt::format("starts at {}, before the param listed ahead of "
                                                 "it (params must be sorted by start)",
                                                 p.start));
      }
      if (p.start < 0 || p.end <= p.start) {
        add(at(i, p.bucket, p.name), fmt::format("range [{}, {}) is empty", p.start, p.end));
        continue;
      }
      if (aligned && p.start % kParamAlignment != 0) {
        add(at(i, p.bucket, p.name),
            fmt::format("starts at {}, not a multiple of {}", p.start, kParamAlignment));
      }
      if (p.start < covered_until) {
        add(at(i, p.bucket, p.name),
            fmt::format("[{}, {}) overlaps param {} (which ends at {})", p.start, p.end,
                        quoted(covered_by), covered_until));
      }
      if (p.end > covered_until) {
        covered_until = p.end;
        covered_by = p.name;
      }
      if (p.bucket < 0 || p.bucket >= static_cast<std::int64_t>(b.buckets.size())) {
        add(at(i, std::nullopt, p.name),
            fmt::format("is in bucket {}, but the buffer has {} bucket(s)", p.bucket,
                        b.buckets.size()));
        continue;
      }
      const auto j = static_cast<std::size_t>(p.bucket);
      const BucketRange& bucket = b.buckets[j];
      if (p.start < bucket.start || p.end > bucket.end) {
        add(at(i, p.bucket, p.name), fmt::format("[{}, {}) is not inside its bucket [{}, {})",
                                                 p.start, p.end, bucket.start, bucket.end));
        continue;
      }
      if (b.strategy == Strategy::layerwise && sharded(b) && usable(b, bucket)) {
        const RankRange ranks = owner_ranks(bucket, *b.num_shards, p.start, p.end);
        if (ranks.first != ranks.last) {
          const std::int64_t shard = bucket.size() / *b.num_shards;
          add(at(i, p.bucket, p.name),
              fmt::format("[{}, {}) straddles the edge of shards {} and {} at {}: a layerwise "
                          "param must lie whole inside one shard",
                          p.start, p.end, ranks.first, ranks.first + 1,
                          bucket.start + (ranks.first + 1) * shard));
        }
      }
      BucketTally& tally = tallies[j];
      ++tally.params;
      if (std::optional<std::int64_t> sum = checked_add(tally.param_numel, p.numel())) {
        tally.param_numel = *sum;
      } else {
        tally.numel_overflows = true;
      }
      tally.last_end = std::max(tally.last_end, p.end);
      if (tally.first_slot == SIZE_MAX) tally.first_slot = k;
    }
  }

  // numel_unpadded of each bucket and of the buffer.
  void check_numel_unpadded(std::size_t i, const std::vector<BucketTally>& tallies) {
    const BufferLayout& b = layout_.buffers[i];
    std::optional<std::int64_t> total = 0;
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const BucketRange& bucket = b.buckets[j];
      const BucketTally& tally = tallies[j];
      const auto id = static_cast<std::int64_t>(j);
      if (total) total = checked_add(*total, bucket.numel_unpadded);
      if (tally.params == 0) {
        add(at(i, id), "holds no param");
        continue;
      }
      if (tally.numel_overflows) continue;  // its params overlap, as reported above
      std::int64_t expected = tally.param_numel;
      std::string why = "the sum of its params' numels";
      if (b.strategy == Strategy::sequential_dp) {
        expected = tally.last_end - bucket.start;
        why = "its last param's end minus its start";
        // A shared embedding may close the bucket at the aligned start it would have taken.
        const std::optional<std::int64_t> aligned_end = checked_add(tally.last_end, 63);
        const std::int64_t rounded =
            aligned_end ? align_param_start(tally.last_end) - bucket.start : expected;
        const std::optional<bool> closed = closed_by_shared_embedding(b, j, tallies);
        if (closed.value_or(bucket.numel_unpadded == rounded) && rounded != expected) {
          expected = rounded;
          why += ", rounded up to 64 as a shared embedding closed it";
        }
      }
      if (bucket.numel_unpadded != expected) {
        add(at(i, id), fmt::format("numel_unpadded is {}, expected {} ({})", bucket.numel_unpadded,
                                   expected, why));
      }
    }
    if (!total) {
      add(at(i), "numel_unpadded of its buckets add up to more than 64 bits hold");
    } else if (b.numel_unpadded != *total) {
      add(at(i), fmt::format("numel_unpadded is {}, expected {} (the sum over its buckets)",
                             b.numel_unpadded, *total));
    }
  }

  // docs/strategies.md, Sequential-dp packing, step 2: a shared embedding closes the open
  // bucket at the aligned start it would have taken, unless the bucket was already closed by
  // its size or is itself a shared embedding's. Unknown (nullopt) without the manifest.
  std::optional<bool> closed_by_shared_embedding(const BufferLayout& b, std::size_t j,
                                                 const std::vector<BucketTally>& tallies) const {
    if (j + 1 >= b.buckets.size() || tallies[j + 1].first_slot == SIZE_MAX) return false;
    if (manifest_ == nullptr) return std::nullopt;
    const Param* next = manifest_param(b.params[tallies[j + 1].first_slot].name);
    if (next == nullptr || !next->shared_embedding) return false;
    const std::optional<std::int64_t>& size = layout_.options.bucket_size;
    if (size && tallies[j].last_end - b.buckets[j].start >= *size) return false;
    const auto id = static_cast<std::int64_t>(j);
    for (std::size_t k = tallies[j].first_slot; k < b.params.size() && b.params[k].bucket == id;
         ++k) {
      const Param* p = manifest_param(b.params[k].name);
      if (p != nullptr && p->shared_embedding) return false;
    }
    return true;
  }

  // Bucket ids never decrease along backprop order (the manifest reversed).
  void check_backprop_order(std::size_t i) {
    const BufferLayout& b = layout_.buffers[i];
    std::vector<std::pair<std::size_t, std::size_t>> order;  // manifest position, slot
    order.reserve(b.params.size());
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      auto it = manifest_position_.find(b.params[k].name);
      if (it != manifest_position_.end()) order.emplace_back(it->second, k);
    }
    std::sort(order.begin(), order.end(), std::greater<>());
    for (std::size_t n = 1; n < order.size(); ++n) {
      const ParamSlot& earlier = b.params[order[n - 1].second];
      const ParamSlot& p = b.params[order[n].second];
      if (p.bucket < earlier.bucket) {
        add(at(i, p.bucket, p.name),
            fmt::format("is in bucket {}, but {}, which comes before it in backprop order, "
                        "is in bucket {} (bucket ids must not decrease along backprop order)",
                        p.bucket, quoted(earlier.name), earlier.bucket));
      }
    }
  }

  // Every name once; with the manifest, every manifest param exactly once, with its numel,
  // key and index, and nothing else.
  void check_names() {
    std::unordered_map<std::string_view, SlotRef> seen;
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) {
      const BufferLayout& b = layout_.buffers[i];
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        const ParamSlot& p = b.params[k];
        auto [it, inserted] = seen.try_emplace(p.name, SlotRef{i, k});
        if (!inserted) {
          const ParamSlot& first = layout_.buffers[it->second.buffer].params[it->second.slot];
          add(at(i, p.bucket, p.name), fmt::format("appears twice (also in {} at [{}, {}))",
                                                   at(it->second.buffer), first.start, first.end));
        } else if (manifest_ != nullptr && manifest_param(p.name) == nullptr) {
          add(at(i, p.bucket, p.name), "is not in the manifest");
        }
      }
    }
    if (manifest_ == nullptr) return;
    for (const BufferGroup& group : group_params(*manifest_, layout_.options)) {
      for (std::size_t n = 0; n < group.params.size(); ++n) {
        const Param& param = manifest_->params[group.params[n]];
        auto it = seen.find(param.name);
        if (it == seen.end()) {
          add("param " + quoted(param.name),
              fmt::format("is in the manifest but missing from the layout (it belongs in a {} "
                          "buffer)",
                          describe(group.key)));
          continue;
        }
        const BufferLayout& b = layout_.buffers[it->second.buffer];
        const ParamSlot& p = b.params[it->second.slot];
        const std::string where = at(it->second.buffer, p.bucket, p.name);
        if (p.numel() != param.numel) {
          add(where, fmt::format("spans {} elements [{}, {}), but the manifest gives it {}",
                                 p.numel(), p.start, p.end, param.numel));
        }
        if (b.key != group.key) {
          add(where, fmt::format("belongs in a {} buffer (its dtype, storage, expert_parallel "
                                 "and Muon attributes under the recorded options)",
                                 describe(group.key)));
        } else if (p.index != group.indices[n]) {
          add(where, fmt::format("index is {}, expected {} (its position among the manifest's "
                                 "params of the same dtype key)",
                                 p.index, group.indices[n]));
        }
      }
    }
  }

  static std::string describe_param_buffer(const ParamBufferLayout& p) {
    if (!p.in_grad_buffer && !p.packed) return "a param buffer of its own at these offsets";
    std::string text = p.in_grad_buffer ? "in the grad buffer" : "";
    if (p.packed) {
      text += fmt::format("{}packed into {} bytes in {} buckets", text.empty() ? "" : ", ", p.numel,
                          p.buckets.size());
    }
    return text;
  }

  // The param buffer: packed buckets one per bucket, contiguous from 0, ending at its numel;
  // with the manifest, where Megatron-LM's DDP keeps the params (plan.hpp,
  // quantized_param_buffer).
  void check_param_buffer(std::size_t i) {
    const BufferLayout& b = layout_.buffers[i];
    const ParamBufferLayout& p = b.param_buffer;
    if (p.packed) {
      bool contiguous = p.buckets.size() == b.buckets.size();
      std::int64_t end = 0;
      for (const BucketRange& bucket : p.buckets) {
        contiguous = contiguous && bucket.start == end && bucket.end >= bucket.start;
        end = bucket.end;
      }
      if (!contiguous || p.numel != end) {
        add(at(i), fmt::format("param_buffer: its {} packed buckets must be contiguous from 0, "
                               "one per bucket ({}), and end at its numel {}",
                               p.buckets.size(), b.buckets.size(), p.numel));
        return;
      }
    }
    if (manifest_ == nullptr) return;
    ParamBufferLayout want;
    if (b.key.param_dtype == DType::uint8) {
      Result<ParamBufferLayout> derived = quantized_param_buffer(b, *manifest_, layout_.options);
      if (!derived) {
        add(at(i), derived.error().message);
        return;
      }
      want = std::move(*derived);
    }
    if (!(p == want)) {
      add(at(i), fmt::format("param_buffer: {}, but Megatron-LM's DDP keeps these params {}",
                             describe_param_buffer(p), describe_param_buffer(want)));
    }
  }

  // One buffer per key; with the manifest, in the order keys first appear in it.
  void check_buffer_keys() {
    std::vector<BufferKey> expected;
    if (manifest_ != nullptr) {
      for (const BufferGroup& g : group_params(*manifest_, layout_.options)) {
        expected.push_back(g.key);
      }
    }
    std::vector<BufferKey> actual;
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) {
      const BufferKey& key = layout_.buffers[i].key;
      if (std::find(actual.begin(), actual.end(), key) != actual.end()) {
        add(at(i), "has the same key as an earlier buffer");
        continue;
      }
      actual.push_back(key);
      if (manifest_ != nullptr &&
          std::find(expected.begin(), expected.end(), key) == expected.end()) {
        add(at(i), "no manifest param has this key under the recorded options");
      }
    }
    if (manifest_ == nullptr) return;
    std::vector<BufferKey> common;
    for (const BufferKey& key : expected) {
      if (std::find(actual.begin(), actual.end(), key) != actual.end()) common.push_back(key);
    }
    std::vector<BufferKey> actual_common;
    for (const BufferKey& key : actual) {
      if (std::find(common.begin(), common.end(), key) != common.end())
        actual_common.push_back(key);
    }
    if (actual_common != common) {
      add("", "buffers are not in the order their keys first appear in the manifest");
    }
  }

  const Layout& layout_;
  const Manifest* manifest_;
  std::unordered_map<std::string_view, std::size_t> manifest_position_;
  std::vector<Violation> violations_;
};

}  // namespace

std::vector<Violation> check_structure(const Layout& layout) {
  return Checker(layout, nullptr).run();
}

Result<void> validate_structure(const Layout& layout) {
  const std::vector<Violation> violations = check_structure(layout);
  if (violations.empty()) return {};
  const std::string more =
      violations.size() == 1
          ? std::string()
          : fmt::format(" (and {} more; paramlayout check lists them all)", violations.size() - 1);
  return Error{fmt::format("{}: not a valid layout: {}{}",
                           layout.source.empty() ? "layout" : layout.source,
                           violations.front().message(), more)};
}

std::vector<Violation> check_layout(const Layout& layout, const Manifest& manifest) {
  return Checker(layout, &manifest).run();
}

}  // namespace paramlayout
