// The values verify writes and expects, shared by the host (cpu backend, reports) and the
// device (CUDA kernels): cheap integer hashes turned into numbers whose sums are exact.
//
// Gradients: each param has K = min(dp, 4) contributing ranks (consecutive, starting at a
// rank chosen by the param); contributor j adds 1 + (hash(param, j, element) & mask), every
// other rank adds 0. With K * (mask + 1) <= 2^mantissa bits, every partial sum is an integer
// the dtype holds exactly, so the reduction is exact in any order, for any dp (the idea of
// nccl-tests' verifiable inputs). Parameters are only copied, so their values are 15- or
// 31-bit hash patterns (never the poison pattern).
#pragma once

#include <bit>
#include <cstdint>

#ifdef __CUDACC__
#define PL_HD __host__ __device__ __forceinline__
#else
#define PL_HD inline
#endif

namespace paramlayout::verify {

/// Element encodings a round can use (matching paramlayout::DType).
enum class Encoding : std::uint8_t { float32, bfloat16, float16, uint8 };

PL_HD int encoding_bytes(Encoding e) {
  return e == Encoding::float32 ? 4 : e == Encoding::uint8 ? 1 : 2;
}

/// Written into receive buffers before each collective: never a value verify expects.
PL_HD std::uint32_t poison_bits(Encoding e) {
  return e == Encoding::float32 ? 0xFFFFFFFFu : e == Encoding::uint8 ? 0xFFu : 0xFFFFu;
}

PL_HD std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

/// Largest contribution minus one: K * (mask + 1) stays within the dtype's exact integers.
PL_HD std::uint32_t contribution_mask(Encoding e) {
  return e == Encoding::float32 ? (1u << 20) - 1 : e == Encoding::float16 ? 511u : 63u;
}

constexpr int kMaxContributors = 4;

PL_HD int contributors(std::int64_t dp) {
  return dp < kMaxContributors ? static_cast<int>(dp) : kMaxContributors;
}

/// The first of a param's contributing ranks.
PL_HD std::int64_t first_contributor(std::int64_t param, std::int64_t dp) {
  return static_cast<std::int64_t>(mix32(static_cast<std::uint32_t>(param) * 2654435761u + 17u) %
                                   static_cast<std::uint32_t>(dp));
}

/// Contributor j of `param`'s seed.
PL_HD std::uint32_t contribution_seed(std::int64_t param, int j) {
  return mix32(static_cast<std::uint32_t>(param) * 4u + static_cast<std::uint32_t>(j));
}

/// What the contributor with `seed` adds at `element`: an integer in [1, mask + 1].
PL_HD std::uint32_t contribution_at(std::uint32_t seed, std::int64_t element, std::uint32_t mask) {
  return 1u + (mix32(seed + static_cast<std::uint32_t>(element)) & mask);
}

PL_HD std::uint32_t contribution(std::int64_t param, int j, std::int64_t element,
                                 std::uint32_t mask) {
  return contribution_at(contribution_seed(param, j), element, mask);
}

/// Which of a param's contributors are ranks in [rank_begin, rank_end): bit j for contributor j.
PL_HD unsigned contributors_in(std::int64_t param, std::int64_t dp, std::int64_t rank_begin,
                               std::int64_t rank_end) {
  const std::int64_t first = first_contributor(param, dp);
  unsigned set = 0;
  const int k = contributors(dp);
  for (int j = 0; j < k; ++j) {
    std::int64_t rank = first + j;
    if (rank >= dp) rank -= dp;
    if (rank >= rank_begin && rank < rank_end) set |= 1u << j;
  }
  return set;
}

/// The sum of the contributions of the contributors in `set` at (param, element).
PL_HD std::uint32_t contribution_sum(std::int64_t param, unsigned set, std::int64_t element,
                                     std::uint32_t mask) {
  std::uint32_t sum = 0;
  for (int j = 0; j < kMaxContributors; ++j) {
    if (set & (1u << j)) sum += contribution(param, j, element, mask);
  }
  return sum;
}

/// The sum of the contributions of ranks [rank_begin, rank_end) at (param, element).
PL_HD std::uint32_t grad_sum(std::int64_t param, std::int64_t element, std::int64_t dp,
                             std::int64_t rank_begin, std::int64_t rank_end, std::uint32_t mask) {
  return contribution_sum(param, contributors_in(param, dp, rank_begin, rank_end), element, mask);
}

/// The bits of a parameter element after the all-gather.
PL_HD std::uint32_t param_bits(std::int64_t param, std::int64_t element, Encoding e) {
  const std::uint32_t h = mix32(mix32(static_cast<std::uint32_t>(param) ^ 0xA511E9B3u) +
                                static_cast<std::uint32_t>(element));
  if (e == Encoding::uint8) return h % 255u;
  return e == Encoding::float32 ? (h & 0x7FFFFFFFu) : (h & 0x7FFFu);
}

/// The bits of the non-negative integer n (< 2^24, exact in the encoding) as that encoding
/// stores it: read off n's float32 bits, which the compiler turns into vector code.
PL_HD std::uint32_t integer_bits(std::uint32_t n, Encoding e) {
#ifdef __CUDA_ARCH__
  const std::uint32_t f = __float_as_uint(static_cast<float>(n));
#else
  const std::uint32_t f = std::bit_cast<std::uint32_t>(static_cast<float>(n));
#endif
  switch (e) {
    case Encoding::float32:
      return f;
    case Encoding::bfloat16:
      return f >> 16;
    case Encoding::float16:
      return n == 0 ? 0 : ((f >> 23) - 112) << 10 | ((f >> 13) & 0x3FFu);
    case Encoding::uint8:
      break;
  }
  return n & 0xFFu;
}

/// How to produce the values of one segment quickly: the contributors' seeds are worked out
/// once per segment, not per element.
struct ValueRule {
  Encoding encoding = Encoding::float32;
  bool copied = false;      ///< a params round: values are patterns, not sums
  std::int64_t param = -1;  ///< -1: padding, value 0
  std::uint32_t mask = 0;
  int count = 0;
  std::uint32_t seeds[kMaxContributors] = {};

  PL_HD std::uint32_t bits(std::int64_t element) const {
    if (param < 0) return 0;
    if (copied) return param_bits(param, element, encoding);
    std::uint32_t sum = 0;
    for (int j = 0; j < count; ++j) sum += contribution_at(seeds[j], element, mask);
    return integer_bits(sum, encoding);
  }
};

/// The values of `param` in a round: a params round's pattern, or the gradient sum of the
/// ranks in [rank_begin, rank_end) out of `dp`.
PL_HD ValueRule value_rule(bool params_round, Encoding encoding, std::int64_t param,
                           std::int64_t dp, std::int64_t rank_begin, std::int64_t rank_end) {
  ValueRule rule;
  rule.encoding = encoding;
  rule.copied = params_round;
  rule.param = param;
  rule.mask = contribution_mask(encoding);
  if (param < 0 || params_round) return rule;
  const unsigned set = contributors_in(param, dp, rank_begin, rank_end);
  for (int j = 0; j < kMaxContributors; ++j) {
    if (set & (1u << j)) rule.seeds[rule.count++] = contribution_seed(param, j);
  }
  return rule;
}

}  // namespace paramlayout::verify
