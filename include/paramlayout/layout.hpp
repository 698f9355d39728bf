// Layout v1: where every parameter sits in its buffer and how buffers are cut into buckets.
// Offsets and sizes are in elements; every range is half-open [start, end).
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// How a buffer's params are placed and padded (docs/strategies.md).
enum class Strategy : std::uint8_t { unpadded, sequential_dp, layerwise };

std::string_view to_string(Strategy strategy);
std::optional<Strategy> parse_strategy(std::string_view name);

/// How layerwise buffers are packed: Megatron-LM's greedy rules (bit-exact), or a packer
/// that keeps every promise with less padding.
enum class Packer : std::uint8_t { megatron, balanced };
std::string_view to_string(Packer packer);
std::optional<Packer> parse_packer(std::string_view name);

/// Largest data-parallel size paramlayout plans for.
inline constexpr std::int64_t kMaxDp = std::int64_t{1} << 20;

/// The options a layout was planned with, all effective values.
struct PlanOptions {
  Strategy strategy = Strategy::sequential_dp;
  std::int64_t dp = 1;
  std::int64_t expert_dp = 1;
  std::optional<std::int64_t> bucket_size;  ///< nullopt: one bucket per buffer
  bool grad_reduce_in_fp32 = false;
  bool pad_for_high_nccl_busbw = false;
  Packer packer = Packer::megatron;  ///< layerwise buffers only

  bool operator==(const PlanOptions&) const = default;
};

/// DistributedDataParallel's fallback bucket size, when its config names none:
/// max(40M, 1M x dp) elements over its `dp` data-parallel ranks (what `plan` takes by
/// default).
std::int64_t ddp_fallback_bucket_size(std::int64_t dp);

/// Megatron-LM training's bucket size when --ddp-bucket-size is not given: max(40M,
/// 1M x dp_cp) elements over the `dp_cp` ranks of the data- and context-parallel group (what
/// `job` takes by default).
std::int64_t training_bucket_size(std::int64_t dp_cp);

/// Identifies one contiguous buffer: params sharing it share dtypes, reduction group and
/// optimizer.
struct BufferKey {
  DType param_dtype = DType::float32;
  DType grad_dtype = DType::float32;
  bool expert_parallel = false;
  bool layerwise = false;  ///< managed by the layer-wise (Muon) optimizer

  auto operator<=>(const BufferKey&) const = default;
};

/// `bfloat16/float32 expert layerwise`: the key as people read it.
std::string describe(const BufferKey& key);

/// One bucket of a buffer: reduce-scattered and all-gathered as a unit.
struct BucketRange {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t numel_unpadded = 0;

  std::int64_t size() const { return end - start; }
  bool operator==(const BucketRange&) const = default;
};

/// Where one parameter sits.
struct ParamSlot {
  std::string_view name;  ///< kept by the owning Layout's NameStore
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t bucket = 0;
  std::int64_t index = 0;  ///< position among params of the same logical dtype key

  std::int64_t numel() const { return end - start; }
  bool operator==(const ParamSlot&) const = default;
};

/// Where Megatron-LM's DDP keeps a buffer's params when that is not a param buffer of their
/// own at the grad buffer's offsets (docs/strategies.md, Quantized params in DDP's buffers).
/// Derived from the layout and the params' storage (plan.hpp, quantized_param_buffer).
struct ParamBufferLayout {
  /// An mxfp8 param in the buffer: the param buffer is a bfloat16 view of the grad buffer,
  /// with no memory of its own; the all-gather moves bfloat16.
  bool in_grad_buffer = false;
  /// An nvfp4 param in the buffer: the param buffer has offsets of its own, in bytes, where
  /// nvfp4 params take half their elements (two values a byte) and the rest their numel.
  bool packed = false;
  std::int64_t numel = 0;            ///< packed: the param buffer's size
  std::vector<BucketRange> buckets;  ///< packed: one per bucket of the buffer, in order
  std::vector<ParamSlot> params;     ///< packed: one per param, in the order of `params`

  bool operator==(const ParamBufferLayout&) const = default;
};

/// One buffer's layout; `params` sorted by `start`.
struct BufferLayout {
  BufferKey key;
  Strategy strategy = Strategy::sequential_dp;
  std::optional<std::int64_t> num_shards;  ///< nullopt for `unpadded`
  std::int64_t numel = 0;
  std::int64_t numel_unpadded = 0;
  std::vector<BucketRange> buckets;
  std::vector<ParamSlot> params;
  ParamBufferLayout param_buffer;  ///< default: a param buffer of its own, these offsets

  /// Sum of the params' numels; nullopt when it does not fit in 64 bits (never for a buffer
  /// that passes check_structure: its params are disjoint and inside it).
  std::optional<std::int64_t> param_numel() const;
  bool operator==(const BufferLayout&) const = default;
};

/// A whole model chunk's layout. Copies share the names.
struct Layout {
  std::string source;  ///< the file it was read from, for messages ("" when planned)
  std::shared_ptr<NameStore> names = std::make_shared<NameStore>();  ///< keeps ParamSlot::name
  std::string generator;
  std::optional<std::string> model;
  std::string manifest_sha256;
  PlanOptions options;
  std::vector<BufferLayout> buffers;
  /// The `stats` member as read (minified JSON), for `check` to hold against the layout;
  /// nullopt when the file has none. Derived: nothing else reads it.
  std::optional<std::string> recorded_stats;
};

/// a + b, or nullopt when the sum does not fit in 64 bits.
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

/// a * b, or nullopt when the product does not fit in 64 bits.
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// pad(v, d): the smallest multiple of `d` that is >= `v` (v >= 0, d >= 1; the caller
/// picks an integer type wide enough for the result).
template <class Int>
constexpr Int pad_to(Int value, Int divisor) {
  return (value + divisor - 1) / divisor * divisor;
}

/// Every param starts on a multiple of this many elements (not under `unpadded`).
inline constexpr std::int64_t kParamAlignment = 64;

/// align(v) = pad(v, 64).
template <class Int>
constexpr Int align_param_start(Int value) {
  static_assert((kParamAlignment & (kParamAlignment - 1)) == 0);
  return (value + Int{kParamAlignment - 1}) & ~Int{kParamAlignment - 1};
}

/// lcm(dp, 128), or lcm(dp, 128, 65536) with `pad_for_high_nccl_busbw`: every sharded
/// bucket's size is a multiple of it.
std::int64_t bucket_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw);

/// lcm(64, bucket_divisor(dp) / dp): every layerwise shard's size is a multiple of it.
std::int64_t shard_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw);

/// The data-parallel ranks that own elements [start, end) of `bucket` in a buffer sharded
/// over `num_shards` ranks: first and last (inclusive). Requires start < end, both inside
/// the bucket and its size a non-zero multiple of `num_shards`.
struct RankRange {
  std::int64_t first = 0;
  std::int64_t last = 0;
  bool operator==(const RankRange&) const = default;
};
RankRange owner_ranks(const BucketRange& bucket, std::int64_t num_shards, std::int64_t start,
                      std::int64_t end);

/// Elements [start, end) of one rank's shard of a bucket.
struct ShardPiece {
  std::int64_t rank = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

/// Elements [start, end) of `bucket`, cut where the shards of `num_shards` ranks meet: one
/// piece per owner rank (owner_ranks), in rank order. Same requirements as owner_ranks.
std::vector<ShardPiece> shard_pieces(const BucketRange& bucket, std::int64_t num_shards,
                                     std::int64_t start, std::int64_t end);

}  // namespace paramlayout
