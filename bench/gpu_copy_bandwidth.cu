// The anchor for verify's fill and check kernels: how fast this GPU copies device memory
// to device memory (cudaMemcpyAsync), counted as bytes read plus bytes written per second.
// Usage: gpu-copy-bandwidth [GiB]   (prints one JSON object)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 4.0;
  const auto bytes = static_cast<std::size_t>(gib * (1ull << 30));
  void* from = nullptr;
  void* to = nullptr;
  cudaEvent_t start;
  cudaEvent_t stop;
  if (cudaMalloc(&from, bytes) != cudaSuccess || cudaMalloc(&to, bytes) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    std::fprintf(stderr, "gpu-copy-bandwidth: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  cudaMemset(from, 1, bytes);
  cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice);  // warm-up
  constexpr int kIterations = 10;
  cudaEventRecord(start);
  for (int i = 0; i < kIterations; ++i) cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(stop);
  const cudaError_t e = cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gpu-copy-bandwidth: %s\n", cudaGetErrorString(e));
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const double seconds = ms / 1e3 / kIterations;
  std::printf("{\"gpu\": \"%s\", \"bytes\": %zu, \"seconds\": %.6f, \"gbps\": %.1f}\n", prop.name,
              bytes, seconds, 2.0 * static_cast<double>(bytes) / seconds / 1e9);
  return 0;
}
