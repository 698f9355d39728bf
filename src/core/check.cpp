#include "paramlayout/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "paramlayout/plan.hpp"

namespace paramlayout {
namespace {

std::string buffer_name(std::size_t i, const BufferLayout& b) {
  return fmt::format("buffer {} ({})", i, describe(b.key));
}

std::string optional_text(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("null");
}

/// Where each param of the layout is, by name.
struct SlotRef {
  std::size_t buffer;
  std::size_t slot;
};

class Checker {
 public:
  Checker(const Layout& layout, const Manifest& manifest) : layout_(layout), manifest_(manifest) {
    manifest_position_.reserve(manifest.params.size());
    for (std::size_t i = 0; i < manifest.params.size(); ++i) {
      manifest_position_.emplace(manifest.params[i].name, i);
    }
  }

  std::vector<Violation> run() {
    if (layout_.manifest_sha256 != manifest_.sha256) {
      add("", fmt::format("was planned from another manifest (manifest_sha256 {}, this "
                          "manifest's {}); the rest is checked by name",
                          abbreviate(layout_.manifest_sha256), abbreviate(manifest_.sha256)));
    }
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) check_buffer(i);
    check_coverage();
    check_buffer_order();
    return std::move(violations_);
  }

 private:
  static std::string abbreviate(const std::string& sha) {
    return sha.size() > 12 ? sha.substr(0, 12) + "..." : sha;
  }

  void add(std::string where, std::string what) {
    violations_.push_back({std::move(where), std::move(what)});
  }

  std::string at(std::size_t i, std::optional<std::int64_t> bucket = std::nullopt,
                 std::string_view param = {}) const {
    std::string out = buffer_name(i, layout_.buffers[i]);
    if (bucket) out += fmt::format(", bucket {}", *bucket);
    if (!param.empty()) out += fmt::format(", param \"{}\"", param);
    return out;
  }

  const Param* manifest_param(std::string_view name) const {
    auto it = manifest_position_.find(name);
    return it == manifest_position_.end() ? nullptr : &manifest_.params[it->second];
  }

  void check_buffer(std::size_t i) {
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
    const bool sharded = b.strategy != Strategy::unpadded && b.num_shards.has_value();
    const bool aligned = b.strategy != Strategy::unpadded;

    // Buckets: contiguous from 0, non-empty, sizes divisible as the strategy requires.
    std::int64_t expected_start = 0;
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const BucketRange& bucket = b.buckets[j];
      const auto id = static_cast<std::int64_t>(j);
      if (bucket.start != expected_start) {
        add(at(i, id), fmt::format("starts at {}, expected {} ({})", bucket.start, expected_start,
                                   j == 0 ? "the buffer's start" : "the previous bucket's end"));
      }
      if (bucket.end <= bucket.start) {
        add(at(i, id), fmt::format("is empty or reversed: [{}, {})", bucket.start, bucket.end));
      } else if (sharded) {
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
      add(at(i), fmt::format("numel is {}, but the last bucket ends at {}", b.numel, expected_numel));
    }

    // Params: sorted, inside their bucket, aligned, disjoint, whole inside one shard.
    std::vector<std::int64_t> bucket_params(b.buckets.size(), 0);
    std::vector<std::int64_t> bucket_param_numel(b.buckets.size(), 0);
    std::vector<std::int64_t> bucket_last_end(b.buckets.size(), 0);
    std::vector<std::size_t> bucket_first_slot(b.buckets.size(), SIZE_MAX);
    std::int64_t covered_until = 0;
    std::string_view covered_by;
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const ParamSlot& p = b.params[k];
      if (k > 0 && p.start < b.params[k - 1].start) {
        add(at(i, p.bucket, p.name), fmt::format("starts at {}, before the param listed ahead of "
                                                 "it (params must be sorted by start)",
                                                 p.start));
      }
      if (p.end <= p.start) {
        add(at(i, p.bucket, p.name), fmt::format("range [{}, {}) is empty", p.start, p.end));
        continue;
      }
      if (aligned && p.start % kParamAlignment != 0) {
        add(at(i, p.bucket, p.name),
            fmt::format("starts at {}, not a multiple of {}", p.start, kParamAlignment));
      }
      if (p.start < covered_until) {
        add(at(i, p.bucket, p.name), fmt::format("[{}, {}) overlaps param \"{}\" (which ends at {})",
                                                 p.start, p.end, covered_by, covered_until));
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
      const BucketRange& bucket = b.buckets[p.bucket];
      if (p.start < bucket.start || p.end > bucket.end) {
        add(at(i, p.bucket, p.name), fmt::format("[{}, {}) is not inside its bucket [{}, {})",
                                                 p.start, p.end, bucket.start, bucket.end));
      } else if (b.strategy == Strategy::layerwise && sharded && bucket.size() % *b.num_shards == 0) {
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
      ++bucket_params[p.bucket];
      bucket_param_numel[p.bucket] += p.numel();
      bucket_last_end[p.bucket] = std::max(bucket_last_end[p.bucket], p.end);
      if (bucket_first_slot[p.bucket] == SIZE_MAX) bucket_first_slot[p.bucket] = k;
    }

    // numel_unpadded of each bucket and of the buffer.
    std::int64_t total_unpadded = 0;
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const BucketRange& bucket = b.buckets[j];
      const auto id = static_cast<std::int64_t>(j);
      total_unpadded += bucket.numel_unpadded;
      if (bucket_params[j] == 0) {
        add(at(i, id), "holds no param");
        continue;
      }
      std::int64_t expected = bucket_param_numel[j];
      std::string why = "the sum of its params' numels";
      if (b.strategy == Strategy::sequential_dp) {
        expected = bucket_last_end[j] - bucket.start;
        why = "its last param's end minus its start";
        if (closed_by_shared_embedding(b, j, bucket_last_end[j], bucket_first_slot)) {
          expected = align_param_start(bucket_last_end[j]) - bucket.start;
          why += ", rounded up to 64 as a shared embedding closed it";
        }
      }
      if (bucket.numel_unpadded != expected) {
        add(at(i, id), fmt::format("numel_unpadded is {}, expected {} ({})", bucket.numel_unpadded,
                                   expected, why));
      }
    }
    if (b.numel_unpadded != total_unpadded) {
      add(at(i), fmt::format("numel_unpadded is {}, expected {} (the sum over its buckets)",
                             b.numel_unpadded, total_unpadded));
    }

    check_backprop_order(i);
  }

  // docs/strategies.md, Sequential-dp packing, step 2: a shared embedding closes the open
  // bucket at the aligned start it would have taken, unless the bucket was already closed by
  // its size or is itself a shared embedding's.
  bool closed_by_shared_embedding(const BufferLayout& b, std::size_t j, std::int64_t last_end,
                                  const std::vector<std::size_t>& first_slot) const {
    if (j + 1 >= b.buckets.size() || first_slot[j + 1] == SIZE_MAX) return false;
    const Param* next = manifest_param(b.params[first_slot[j + 1]].name);
    if (next == nullptr || !next->shared_embedding) return false;
    const std::optional<std::int64_t>& size = layout_.options.bucket_size;
    if (size && last_end - b.buckets[j].start >= *size) return false;
    for (std::size_t k = first_slot[j]; k < b.params.size() && b.params[k].bucket ==
                                                                    static_cast<std::int64_t>(j);
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
            fmt::format("is in bucket {}, but \"{}\", which comes before it in backprop order, "
                        "is in bucket {} (bucket ids must not decrease along backprop order)",
                        p.bucket, earlier.name, earlier.bucket));
      }
    }
  }

  // Every manifest param exactly once, with its numel, key and index; nothing else.
  void check_coverage() {
    std::unordered_map<std::string_view, SlotRef> seen;
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) {
      const BufferLayout& b = layout_.buffers[i];
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        const ParamSlot& p = b.params[k];
        auto [it, inserted] = seen.try_emplace(p.name, SlotRef{i, k});
        if (!inserted) {
          add(at(i, p.bucket, p.name),
              fmt::format("appears twice (also in {} at [{}, {}))",
                          buffer_name(it->second.buffer, layout_.buffers[it->second.buffer]),
                          layout_.buffers[it->second.buffer].params[it->second.slot].start,
                          layout_.buffers[it->second.buffer].params[it->second.slot].end));
        } else if (manifest_param(p.name) == nullptr) {
          add(at(i, p.bucket, p.name), "is not in the manifest");
        }
      }
    }
    for (const BufferGroup& group : group_params(manifest_, layout_.options)) {
      for (std::size_t n = 0; n < group.params.size(); ++n) {
        const Param& param = manifest_.params[group.params[n]];
        auto it = seen.find(param.name);
        if (it == seen.end()) {
          add(fmt::format("param \"{}\"", param.name),
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

  // One buffer per key, in the order keys first appear in the manifest.
  void check_buffer_order() {
    std::vector<BufferKey> expected;
    for (const BufferGroup& g : group_params(manifest_, layout_.options)) expected.push_back(g.key);
    std::vector<BufferKey> actual;
    for (std::size_t i = 0; i < layout_.buffers.size(); ++i) {
      const BufferKey& key = layout_.buffers[i].key;
      if (std::find(actual.begin(), actual.end(), key) != actual.end()) {
        add(at(i), "has the same key as an earlier buffer");
        continue;
      }
      actual.push_back(key);
      if (std::find(expected.begin(), expected.end(), key) == expected.end()) {
        add(at(i), "no manifest param has this key under the recorded options");
      }
    }
    std::vector<BufferKey> common;
    for (const BufferKey& key : expected) {
      if (std::find(actual.begin(), actual.end(), key) != actual.end()) common.push_back(key);
    }
    std::vector<BufferKey> actual_common;
    for (const BufferKey& key : actual) {
      if (std::find(common.begin(), common.end(), key) != common.end()) actual_common.push_back(key);
    }
    if (actual_common != common) {
      add("", "buffers are not in the order their keys first appear in the manifest");
    }
  }

  const Layout& layout_;
  const Manifest& manifest_;
  std::unordered_map<std::string_view, std::size_t> manifest_position_;
  std::vector<Violation> violations_;
};

}  // namespace

RankRange owner_ranks(const BucketRange& bucket, std::int64_t num_shards, std::int64_t start,
                      std::int64_t end) {
  const std::int64_t shard = bucket.size() / num_shards;
  return {(start - bucket.start) / shard, (end - 1 - bucket.start) / shard};
}

std::vector<Violation> check_layout(const Layout& layout, const Manifest& manifest) {
  return Checker(layout, manifest).run();
}

std::vector<Violation> compare_with_replan(const Layout& layout, const Manifest& manifest) {
  std::vector<Violation> out;
  Result<Layout> fresh = plan(manifest, layout.options);
  if (!fresh) {
    out.push_back({"", "the manifest cannot be planned again: " + fresh.error().message});
    return out;
  }
  auto find_buffer = [](const Layout& l, const BufferKey& key) -> const BufferLayout* {
    for (const BufferLayout& b : l.buffers) {
      if (b.key == key) return &b;
    }
    return nullptr;
  };
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    const BufferLayout& b = layout.buffers[i];
    const std::string where = buffer_name(i, b);
    const BufferLayout* want = find_buffer(*fresh, b.key);
    if (want == nullptr) {
      out.push_back({where, "a fresh plan has no buffer with this key"});
      continue;
    }
    if (b.numel != want->numel || b.numel_unpadded != want->numel_unpadded) {
      out.push_back({where, fmt::format("numel {} (unpadded {}), a fresh plan gives {} ({})",
                                        b.numel, b.numel_unpadded, want->numel,
                                        want->numel_unpadded)});
    }
    for (std::size_t j = 0; j < std::max(b.buckets.size(), want->buckets.size()); ++j) {
      const BucketRange* have = j < b.buckets.size() ? &b.buckets[j] : nullptr;
      const BucketRange* fresh_bucket = j < want->buckets.size() ? &want->buckets[j] : nullptr;
      auto text = [](const BucketRange* r) {
        return r ? fmt::format("[{}, {}) unpadded {}", r->start, r->end, r->numel_unpadded)
                 : std::string("absent");
      };
      if (!have || !fresh_bucket || !(*have == *fresh_bucket)) {
        out.push_back({fmt::format("{}, bucket {}", where, j),
                       fmt::format("is {}, a fresh plan gives {}", text(have), text(fresh_bucket))});
      }
    }
    std::unordered_map<std::string_view, const ParamSlot*> fresh_slots;
    for (const ParamSlot& p : want->params) fresh_slots.emplace(p.name, &p);
    for (const ParamSlot& p : b.params) {
      auto it = fresh_slots.find(p.name);
      if (it == fresh_slots.end()) {
        out.push_back({fmt::format("{}, param \"{}\"", where, p.name),
                       "a fresh plan puts it in another buffer or nowhere"});
      } else if (!(p == *it->second)) {
        const ParamSlot& f = *it->second;
        out.push_back({fmt::format("{}, param \"{}\"", where, p.name),
                       fmt::format("is at [{}, {}) in bucket {} (index {}), a fresh plan puts it "
                                   "at [{}, {}) in bucket {} (index {})",
                                   p.start, p.end, p.bucket, p.index, f.start, f.end, f.bucket,
                                   f.index)});
      }
    }
  }
  for (const BufferLayout& want : fresh->buffers) {
    if (find_buffer(layout, want.key) == nullptr) {
      out.push_back({"", fmt::format("a fresh plan has a {} buffer the layout lacks",
                                     describe(want.key))});
    }
  }
  return out;
}

}  // namespace paramlayout
