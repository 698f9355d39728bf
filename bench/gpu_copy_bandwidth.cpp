// The anchor for verify's fill and check kernels: how fast this GPU copies device memory
// to device memory (cudaMemcpyAsync), counted as bytes read plus bytes written per second.
// The median of 20 timed copies after a warm-up, each timed with events.
// Usage: gpu-copy-bandwidth [GiB]   (prints one JSON object; exit 2 on a CUDA error)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpu-copy-bandwidth: CUDA error in %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 4.0;
  if (!(gib > 0 && gib <= 64)) {
    std::fprintf(stderr, "gpu-copy-bandwidth: expected a size in GiB in (0, 64], got %s\n",
                 argv[1]);
    return 2;
  }
  const auto bytes = static_cast<std::size_t>(gib * (1ull << 30));
  void* from = nullptr;
  void* to = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") ||
      !ok(cudaMalloc(&from, bytes), "cudaMalloc") || !ok(cudaMalloc(&to, bytes), "cudaMalloc") ||
      !ok(cudaEventCreate(&start), "cudaEventCreate") ||
      !ok(cudaEventCreate(&stop), "cudaEventCreate") ||
      !ok(cudaMemset(from, 0x5A, bytes), "cudaMemset") ||
      !ok(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy (warm-up)")) {
    return 2;
  }
  constexpr int kCopies = 20;
  std::vector<float> ms(kCopies);
  for (float& m : ms) {
    if (!ok(cudaEventRecord(start), "cudaEventRecord") ||
        !ok(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync") ||
        !ok(cudaEventRecord(stop), "cudaEventRecord") ||
        !ok(cudaEventSynchronize(stop), "cudaEventSynchronize") ||
        !ok(cudaEventElapsedTime(&m, start, stop), "cudaEventElapsedTime")) {
      return 2;
    }
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[kCopies / 2] / 1e3;
  const double best = ms.front() / 1e3;
  std::printf(
      "{\"gpu\": \"%s\", \"bytes\": %zu, \"copies\": %d, \"seconds\": %.6f, "
      "\"gbps\": %.1f, \"best_gbps\": %.1f}\n",
      prop.name, bytes, kCopies, median, 2.0 * static_cast<double>(bytes) / median / 1e9,
      2.0 * static_cast<double>(bytes) / best / 1e9);
  return 0;
}
