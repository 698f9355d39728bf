// The fill and check kernels of the nccl backend. Both walk tiles of segments with a
// grid-stride loop; check counts mismatches per thread, sums them per block and adds one
// 64-bit total per block, and keeps a mismatch only while fewer than kKeptMismatches are
// kept, so a chunk that is wrong throughout costs no more than a right one.
#include "nccl_kernels.hpp"

#include <algorithm>

namespace paramlayout::verify {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Which segment tile `b` falls in: tile_start is the prefix sum of each segment's tiles.
__device__ int segment_of_tile(const std::int64_t* tile_start, int segments, std::int64_t b) {
  int lo = 0;
  int hi = segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    fill_kernel(DeviceSegments s, bool params, Encoding encoding, std::int64_t dp,
                std::int64_t rank_begin, std::int64_t rank_end, T* out) {
  for (std::int64_t b = blockIdx.x; b < s.tiles; b += gridDim.x) {
    const int i = segment_of_tile(s.tile_start, s.count, b);
    const Segment seg = s.segments[i];
    const ValueRule rule = value_rule(params, encoding, seg.param, dp, rank_begin, rank_end);
    const std::int64_t first = (b - s.tile_start[i]) * kTile;
    const std::int64_t last = min(first + kTile, seg.length);
    for (std::int64_t k = first + threadIdx.x; k < last; k += blockDim.x) {
      out[seg.begin + k] = static_cast<T>(rule.bits(seg.element + k));
    }
  }
}

// The sum of `value` over the block, in thread 0.
__device__ unsigned long long block_sum(unsigned long long value) {
  __shared__ unsigned long long per_warp[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  }
  if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = value;
  __syncthreads();
  unsigned long long total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kWarps; ++w) total += per_warp[w];
  }
  return total;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    check_kernel(DeviceSegments s, bool params, Encoding encoding, std::int64_t dp,
                 std::int64_t device, const T* in, DeviceResult* result) {
  unsigned long long wrong = 0;
  bool tried_to_keep = false;  // each thread claims at most one slot
  for (std::int64_t b = blockIdx.x; b < s.tiles; b += gridDim.x) {
    const int i = segment_of_tile(s.tile_start, s.count, b);
    const Segment seg = s.segments[i];
    const ValueRule rule = value_rule(params, encoding, seg.param, dp, 0, dp);
    const std::int64_t first = (b - s.tile_start[i]) * kTile;
    const std::int64_t last = min(first + kTile, seg.length);
    for (std::int64_t k = first + threadIdx.x; k < last; k += blockDim.x) {
      const std::uint32_t want = rule.bits(seg.element + k);
      const std::uint32_t got = in[seg.begin + k];
      if (want == got) continue;
      ++wrong;
      if (!tried_to_keep &&
          *static_cast<volatile unsigned long long*>(&result->kept) < kKeptMismatches) {
        tried_to_keep = true;
        const unsigned long long slot = atomicAdd(&result->kept, 1ULL);
        if (slot < kKeptMismatches) {
          result->first[slot] =
              Mismatch{device, seg.begin + k, seg.param, seg.element + k, want, got};
        }
      }
    }
  }
  const unsigned long long total = block_sum(wrong);
  if (threadIdx.x == 0 && total > 0) atomicAdd(&result->mismatches, total);
}

unsigned int grid(std::int64_t tiles) {
  return static_cast<unsigned int>(
      std::max<std::int64_t>(1, std::min<std::int64_t>(tiles, 1 << 20)));
}

/// Calls f(T{}) with T the unsigned word an element of encoding `e` is stored in.
template <class F>
void with_word(Encoding e, F&& f) {
  switch (encoding_bytes(e)) {
    case 1:
      return f(std::uint8_t{});
    case 2:
      return f(std::uint16_t{});
    default:
      return f(std::uint32_t{});
  }
}

}  // namespace

cudaError_t launch_fill(const DeviceSegments& s, bool params, Encoding encoding, std::int64_t dp,
                        std::int64_t rank_begin, std::int64_t rank_end, void* out,
                        cudaStream_t stream) {
  if (s.tiles == 0) return cudaSuccess;
  with_word(encoding, [&](auto word) {
    using T = decltype(word);
    fill_kernel<T><<<grid(s.tiles), kThreads, 0, stream>>>(s, params, encoding, dp, rank_begin,
                                                           rank_end, static_cast<T*>(out));
  });
  return cudaGetLastError();
}

cudaError_t launch_check(const DeviceSegments& s, bool params, Encoding encoding, std::int64_t dp,
                         std::int64_t device, const void* in, DeviceResult* result,
                         cudaStream_t stream) {
  if (s.tiles == 0) return cudaSuccess;
  with_word(encoding, [&](auto word) {
    using T = decltype(word);
    check_kernel<T><<<grid(s.tiles), kThreads, 0, stream>>>(s, params, encoding, dp, device,
                                                            static_cast<const T*>(in), result);
  });
  return cudaGetLastError();
}

}  // namespace paramlayout::verify
