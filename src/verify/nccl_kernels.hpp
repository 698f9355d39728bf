// The nccl backend's fill and check kernels, as host functions that launch them on a stream.
// A round buffer is described by segments (backend.hpp); each thread block takes tiles of
// kTile elements of one segment, found from the prefix sums of the segments' tile counts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend.hpp"

namespace paramlayout::verify {

inline constexpr std::int64_t kTile = 8192;  ///< elements per thread block and segment tile

/// What a check kernel reports back: every mismatch counted, the first few kept.
struct DeviceResult {
  unsigned long long mismatches;
  /// Slots claimed in `first`; it can pass kKeptMismatches, but only that many are written.
  unsigned long long kept;
  Mismatch first[kKeptMismatches];
};

/// A round buffer's segments as the kernels read them, in device memory.
struct DeviceSegments {
  const Segment* segments = nullptr;
  const std::int64_t* tile_start = nullptr;  ///< the first tile of each segment
  int count = 0;
  std::int64_t tiles = 0;
};

/// Writes the values that ranks [rank_begin, rank_end) send (their summed gradients, or
/// their params) into `out`, elements of `encoding`.
cudaError_t launch_fill(const DeviceSegments& s, bool params, Encoding encoding, std::int64_t dp,
                        std::int64_t rank_begin, std::int64_t rank_end, void* out,
                        cudaStream_t stream);

/// Compares `in` with the values expected after the round's collective; counts the
/// mismatches into `result` (zeroed by the caller) and keeps the first few.
cudaError_t launch_check(const DeviceSegments& s, bool params, Encoding encoding, std::int64_t dp,
                         std::int64_t device, const void* in, DeviceResult* result,
                         cudaStream_t stream);

}  // namespace paramlayout::verify
