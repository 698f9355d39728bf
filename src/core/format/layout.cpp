#include "paramlayout/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>

namespace paramlayout {
namespace {

constexpr std::array<std::string_view, 3> kStrategyNames = {"unpadded", "sequential-dp",
                                                            "layerwise"};

}  // namespace

std::string_view to_string(Strategy strategy) {
  return kStrategyNames[static_cast<std::size_t>(strategy)];
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  for (std::size_t i = 0; i < kStrategyNames.size(); ++i) {
    if (kStrategyNames[i] == name) return static_cast<Strategy>(i);
  }
  return std::nullopt;
}

std::int64_t ddp_fallback_bucket_size(std::int64_t dp) {
  // megatron/core/distributed/distributed_data_parallel.py: max(40000000, 1000000 *
  // dp_group.size()).
  return std::max<std::int64_t>(40'000'000, 1'000'000 * dp);
}

std::int64_t training_bucket_size(std::int64_t dp_cp) {
  // megatron/training/training.py: max(40000000, 1000000 * get_pg_size(dp_cp_group)).
  return std::max<std::int64_t>(40'000'000, 1'000'000 * dp_cp);
}

std::string describe(const BufferKey& key) {
  std::string out = fmt::format("{}/{}", to_string(key.param_dtype), to_string(key.grad_dtype));
  if (key.expert_parallel) out += " expert";
  if (key.layerwise) out += " layerwise";
  return out;
}

std::optional<std::int64_t> BufferLayout::param_numel() const {
  std::optional<std::int64_t> total = 0;
  for (const ParamSlot& p : params) {
    total = checked_add(*total, p.numel());
    if (!total) break;
  }
  return total;
}

std::string_view to_string(Packer packer) {
  return packer == Packer::balanced ? "balanced" : "megatron";
}

std::optional<Packer> parse_packer(std::string_view name) {
  if (name == "megatron") return Packer::megatron;
  if (name == "balanced") return Packer::balanced;
  return std::nullopt;
}

std::int64_t bucket_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw) {
  std::int64_t d = std::lcm(dp, std::int64_t{128});
  return pad_for_high_nccl_busbw ? std::lcm(d, std::int64_t{65536}) : d;
}

std::int64_t shard_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw) {
  return std::lcm(kParamAlignment, bucket_divisor(dp, pad_for_high_nccl_busbw) / dp);
}

RankRange owner_ranks(const BucketRange& bucket, std::int64_t num_shards, std::int64_t start,
                      std::int64_t end) {
  const std::int64_t shard = bucket.size() / num_shards;
  return {(start - bucket.start) / shard, (end - 1 - bucket.start) / shard};
}

std::vector<ShardPiece> shard_pieces(const BucketRange& bucket, std::int64_t num_shards,
                                     std::int64_t start, std::int64_t end) {
  const std::int64_t shard = bucket.size() / num_shards;
  const RankRange ranks = owner_ranks(bucket, num_shards, start, end);
  std::vector<ShardPiece> pieces;
  for (std::int64_t r = ranks.first; r <= ranks.last; ++r) {
    pieces.push_back({r, std::max(start, bucket.start + r * shard),
                      std::min(end, bucket.start + (r + 1) * shard)});
  }
  return pieces;
}

}  // namespace paramlayout
