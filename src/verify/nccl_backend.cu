// The nccl backend: real CUDA buffers on every visible GPU, NCCL collectives among them,
// fill and check as kernels. Only mismatch counts and the first few mismatches come back to
// the host. One process drives all its GPUs (ncclCommInitAll), or, under an MPI launcher,
// each process drives one and rank 0's ncclUniqueId, broadcast, joins them
// (ncclCommInitRank). A device stands for dp / G consecutive ranks, so its send buffer holds
// the sum of their contributions.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"

namespace paramlayout::verify {
namespace {

constexpr std::int64_t kTile = 8192;   // elements per thread block and segment tile
constexpr int kThreads = 256;

/// What a check kernel reports back.
struct DeviceResult {
  unsigned long long mismatches;
  unsigned int kept;
  Mismatch first[kKeptMismatches];
};

/// The first CUDA or NCCL failure, with what was being done; later calls are skipped.
class Status {
 public:
  bool ok() const { return message_.empty(); }
  Status& cuda(cudaError_t e, const char* what) {
    if (ok() && e != cudaSuccess) message_ = std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e);
    return *this;
  }
  Status& nccl(ncclResult_t e, const char* what) {
    if (ok() && e != ncclSuccess) message_ = std::string("NCCL error in ") + what + ": " + ncclGetErrorString(e);
    return *this;
  }
  Status& fail(std::string message) {
    if (ok()) message_ = std::move(message);
    return *this;
  }
  Error error() const { return Error{message_}; }
  std::optional<std::string> failure() const {
    return ok() ? std::nullopt : std::optional<std::string>(message_);
  }

 private:
  std::string message_;
};

// Which segment tile `b` falls in: tile_start is the prefix sum of each segment's tiles.
__device__ int segment_of_tile(const std::int64_t* tile_start, int segments, std::int64_t b) {
  int lo = 0;
  int hi = segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}

template <class T>
__global__ void fill_kernel(const Segment* segments, const std::int64_t* tile_start, int count,
                            std::int64_t tiles, bool params, Encoding encoding, std::int64_t dp,
                            std::int64_t rank_begin, std::int64_t rank_end, T* out) {
  for (std::int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
    const int s = segment_of_tile(tile_start, count, b);
    const Segment seg = segments[s];
    const ValueRule rule = value_rule(params, encoding, seg.param, dp, rank_begin, rank_end);
    const std::int64_t first = (b - tile_start[s]) * kTile;
    const std::int64_t last = min(first + kTile, seg.length);
    for (std::int64_t k = first + threadIdx.x; k < last; k += blockDim.x) {
      out[seg.begin + k] = static_cast<T>(rule.bits(seg.element + k));
    }
  }
}

template <class T>
__global__ void check_kernel(const Segment* segments, const std::int64_t* tile_start, int count,
                             std::int64_t tiles, bool params, Encoding encoding, std::int64_t dp,
                             std::int64_t device, const T* in, DeviceResult* result) {
  for (std::int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
    const int s = segment_of_tile(tile_start, count, b);
    const Segment seg = segments[s];
    const ValueRule rule = value_rule(params, encoding, seg.param, dp, 0, dp);
    const std::int64_t first = (b - tile_start[s]) * kTile;
    const std::int64_t last = min(first + kTile, seg.length);
    for (std::int64_t k = first + threadIdx.x; k < last; k += blockDim.x) {
      const std::uint32_t want = rule.bits(seg.element + k);
      const std::uint32_t got = in[seg.begin + k];
      if (want == got) continue;
      atomicAdd(&result->mismatches, 1ULL);
      const unsigned int slot = atomicAdd(&result->kept, 1u);
      if (slot < kKeptMismatches) {
        result->first[slot] = Mismatch{device, seg.begin + k, seg.param, seg.element + k, want, got};
      }
    }
  }
}

/// Calls f(T{}) with T the unsigned word an element of encoding `e` is stored in.
template <class F>
void with_word(Encoding e, F&& f) {
  switch (encoding_bytes(e)) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    default: return f(std::uint32_t{});
  }
}

ncclDataType_t nccl_type(Encoding e) {
  switch (e) {
    case Encoding::float32: return ncclFloat32;
    case Encoding::bfloat16: return ncclBfloat16;
    case Encoding::float16: return ncclFloat16;
    case Encoding::uint8: return ncclUint8;
  }
  return ncclUint8;
}

class NcclBackend final : public Backend {
 public:
  /// Drives the GPUs `ids`, devices `first`, `first` + 1, ... of `total` in all.
  NcclBackend(std::vector<int> ids, std::int64_t first, std::int64_t total, double timeout,
              Peers& peers)
      : total_(total), timeout_(timeout), peers_(peers) {
    for (int id : ids) {
      Device& d = devices_.emplace_back();
      d.id = id;
      d.index = first++;
    }
  }

  ~NcclBackend() override {
    for (auto& [size, comms] : comms_) {
      for (ncclComm_t c : comms) ncclCommDestroy(c);
    }
    for (Device& d : devices_) {
      cudaSetDevice(d.id);
      cudaFree(d.send);
      cudaFree(d.recv);
      cudaFree(d.segments);
      cudaFree(d.tile_start);
      cudaFree(d.result);
      if (d.stream) cudaStreamDestroy(d.stream);
      if (d.start) cudaEventDestroy(d.start);
      if (d.stop) cudaEventDestroy(d.stop);
      if (d.work_start) cudaEventDestroy(d.work_start);
      if (d.work_stop) cudaEventDestroy(d.work_stop);
    }
  }

  Status init() {
    Status st;
    for (Device& d : devices_) {
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice")
          .cuda(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate")
          .cuda(cudaEventCreate(&d.start), "cudaEventCreate")
          .cuda(cudaEventCreate(&d.stop), "cudaEventCreate")
          .cuda(cudaEventCreate(&d.work_start), "cudaEventCreate")
          .cuda(cudaEventCreate(&d.work_stop), "cudaEventCreate")
          .cuda(cudaMalloc(&d.result, sizeof(DeviceResult)), "cudaMalloc");
      if (!st.ok()) break;
      cudaDeviceProp prop{};
      st.cuda(cudaGetDeviceProperties(&prop, d.id), "cudaGetDeviceProperties");
      name_ = prop.name;
      std::size_t free = 0;
      std::size_t total = 0;
      st.cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
      min_free_ = min_free_ == 0 ? free : std::min(min_free_, free);
    }
    st = agree(st);
    if (st.ok()) min_free_ = static_cast<std::size_t>(-peers_.max(-static_cast<double>(min_free_)));
    return st;
  }

  std::string describe() const override {
    if (peers_.size() > 1) return "nccl over MPI, " + std::to_string(total_) + " processes x " + name_;
    return "nccl, " + std::to_string(total_) + " x " + name_;
  }
  std::int64_t devices() const override { return total_; }

  std::int64_t preferred_block_elements() const override {
    // Send and receive buffers of devices * block 4-byte elements in at most a quarter of
    // the free memory, and at most 8 GiB.
    const double budget = std::min(static_cast<double>(min_free_) / 4, 8.0 * (1ull << 30));
    const double block = budget / (2.0 * 4.0 * static_cast<double>(total_));
    return std::max<std::int64_t>(1 << 20, static_cast<std::int64_t>(block) / kTile * kTile);
  }

  Result<void> reserve(std::int64_t length) override {
    Status st;
    const std::size_t bytes = static_cast<std::size_t>(length) * static_cast<std::size_t>(total_) * 4;
    for (Device& d : devices_) {
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice");
      if (d.capacity >= bytes) continue;
      cudaFree(d.send);
      cudaFree(d.recv);
      d.send = d.recv = nullptr;
      st.cuda(cudaMalloc(&d.send, bytes), "cudaMalloc (send buffer)")
          .cuda(cudaMalloc(&d.recv, bytes), "cudaMalloc (receive buffer)");
      d.capacity = bytes;
    }
    st = agree(st);
    if (!st.ok()) return st.error();
    return {};
  }

  Result<double> fill(const Round& round) override {
    Status st;
    const bool grads = round.kind == RoundKind::grads;
    const std::int64_t per_device = round.ranks_per_device();
    const std::size_t received = static_cast<std::size_t>(
        (grads ? round.length : round.devices * round.length) * encoding_bytes(round.encoding));
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      Device& d = devices_[i];
      const std::vector<Segment>& sent = grads ? round.all_blocks : round.own_block[d.index];
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice");
      upload(st, d, sent);
      st.cuda(cudaEventRecord(d.work_start, d.stream), "cudaEventRecord")
          .cuda(cudaMemsetAsync(d.recv, 0xFF, received, d.stream), "cudaMemsetAsync (poison)");
      if (!st.ok()) break;
      launch_fill(d, !grads, round, d.index * per_device, (d.index + 1) * per_device);
      st.cuda(cudaGetLastError(), "the fill kernel")
          .cuda(cudaEventRecord(d.work_stop, d.stream), "cudaEventRecord");
    }
    st = synchronize(st, round);
    return slowest(st, round, &Device::work_start, &Device::work_stop);
  }

  Result<double> collective(const Round& round) override {
    Status st;
    std::vector<ncclComm_t>* comms = communicators(st, round.devices);
    if (!st.ok()) return st.error();
    const bool grads = round.kind == RoundKind::grads;
    const std::size_t bytes = static_cast<std::size_t>(round.length * encoding_bytes(round.encoding));
    st.nccl(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t g = 0; g < comms->size() && st.ok(); ++g) {
      Device& d = devices_[g];
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice")
          .cuda(cudaEventRecord(d.start, d.stream), "cudaEventRecord");
      if (grads) {
        st.nccl(ncclReduceScatter(d.send, d.recv, static_cast<std::size_t>(round.length),
                                  nccl_type(round.encoding), ncclSum, (*comms)[g], d.stream),
                "ncclReduceScatter");
      } else {
        st.nccl(ncclAllGather(d.send, d.recv, bytes, ncclUint8, (*comms)[g], d.stream),
                "ncclAllGather");
      }
    }
    st.nccl(ncclGroupEnd(), "ncclGroupEnd");
    for (std::size_t g = 0; g < comms->size() && st.ok(); ++g) {
      st.cuda(cudaSetDevice(devices_[g].id), "cudaSetDevice")
          .cuda(cudaEventRecord(devices_[g].stop, devices_[g].stream), "cudaEventRecord");
    }
    st = wait(st, round, *comms, grads ? "ncclReduceScatter" : "ncclAllGather");
    return slowest(st, round, &Device::start, &Device::stop);
  }

  Result<CheckResult> check(const Round& round) override {
    Status st;
    const bool grads = round.kind == RoundKind::grads;
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      Device& d = devices_[i];
      const std::vector<Segment>& received = grads ? round.own_block[d.index] : round.all_blocks;
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice")
          .cuda(cudaMemsetAsync(d.result, 0, sizeof(DeviceResult), d.stream), "cudaMemsetAsync");
      upload(st, d, received);
      st.cuda(cudaEventRecord(d.work_start, d.stream), "cudaEventRecord");
      if (!st.ok()) break;
      launch_check(d, !grads, round, d.index);
      st.cuda(cudaGetLastError(), "the check kernel")
          .cuda(cudaEventRecord(d.work_stop, d.stream), "cudaEventRecord");
    }
    st = synchronize(st, round);
    CheckResult result;
    Result<double> seconds = slowest(st, round, &Device::work_start, &Device::work_stop);
    if (!seconds) return seconds.error();
    result.seconds = *seconds;
    std::vector<Mismatch> first;
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      DeviceResult r{};
      st.cuda(cudaSetDevice(devices_[i].id), "cudaSetDevice")
          .cuda(cudaMemcpyAsync(&r, devices_[i].result, sizeof r, cudaMemcpyDeviceToHost,
                                devices_[i].stream), "cudaMemcpyAsync (check result)")
          .cuda(cudaStreamSynchronize(devices_[i].stream), "cudaStreamSynchronize");
      result.mismatches += static_cast<std::int64_t>(r.mismatches);
      first.insert(first.end(), r.first, r.first + std::min<unsigned int>(r.kept, kKeptMismatches));
    }
    st = agree(st);
    if (!st.ok()) return st.error();
    result.mismatches = peers_.sum(result.mismatches);
    result.first = kept_mismatches(first);
    return result;
  }

 private:
  struct Device {
    int id = 0;
    std::int64_t index = 0;  // among all devices, in every process
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    cudaEvent_t work_start = nullptr;  // around fill and check
    cudaEvent_t work_stop = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    std::size_t capacity = 0;
    Segment* segments = nullptr;
    std::int64_t* tile_start = nullptr;
    std::size_t segment_capacity = 0;
    int segment_count = 0;
    std::int64_t tiles = 0;
    DeviceResult* result = nullptr;
    std::vector<std::int64_t> host_tiles;
  };

  // Copies the segments and the prefix sums of their tiles to the device.
  void upload(Status& st, Device& d, const std::vector<Segment>& segments) {
    d.host_tiles.resize(segments.size());
    std::int64_t tiles = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      d.host_tiles[i] = tiles;
      tiles += (segments[i].length + kTile - 1) / kTile;
    }
    d.tiles = tiles;
    d.segment_count = static_cast<int>(segments.size());
    if (segments.size() > d.segment_capacity) {
      cudaFree(d.segments);
      cudaFree(d.tile_start);
      d.segments = nullptr;
      d.tile_start = nullptr;
      d.segment_capacity = std::max<std::size_t>(segments.size(), 2 * d.segment_capacity);
      st.cuda(cudaMalloc(&d.segments, d.segment_capacity * sizeof(Segment)), "cudaMalloc (segments)")
          .cuda(cudaMalloc(&d.tile_start, d.segment_capacity * sizeof(std::int64_t)), "cudaMalloc (tiles)");
    }
    // Pageable copies on the stream: staged before they return, ordered before the kernel.
    st.cuda(cudaMemcpyAsync(d.segments, segments.data(), segments.size() * sizeof(Segment),
                            cudaMemcpyHostToDevice, d.stream), "cudaMemcpyAsync (segments)")
        .cuda(cudaMemcpyAsync(d.tile_start, d.host_tiles.data(),
                              segments.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                              d.stream), "cudaMemcpyAsync (tiles)");
  }

  static unsigned int grid(std::int64_t tiles) {
    return static_cast<unsigned int>(std::max<std::int64_t>(1, std::min<std::int64_t>(tiles, 1 << 20)));
  }

  void launch_fill(Device& d, bool params, const Round& r,
                   std::int64_t rank_begin, std::int64_t rank_end) {
    if (d.tiles == 0) return;
    with_word(r.encoding, [&](auto word) {
      using T = decltype(word);
      fill_kernel<T><<<grid(d.tiles), kThreads, 0, d.stream>>>(
          d.segments, d.tile_start, d.segment_count, d.tiles, params, r.encoding, r.dp,
          rank_begin, rank_end, static_cast<T*>(d.send));
    });
  }

  void launch_check(Device& d, bool params, const Round& r,
                    std::int64_t device) {
    if (d.tiles == 0) return;
    with_word(r.encoding, [&](auto word) {
      using T = decltype(word);
      check_kernel<T><<<grid(d.tiles), kThreads, 0, d.stream>>>(
          d.segments, d.tile_start, d.segment_count, d.tiles, params, r.encoding, r.dp, device,
          static_cast<const T*>(d.recv), d.result);
    });
  }

  // This process's devices that take part in a round: a prefix, as their indices ascend.
  std::size_t taking_part(std::int64_t round_devices) const {
    std::size_t n = 0;
    while (n < devices_.size() && devices_[n].index < round_devices) ++n;
    return n;
  }
  std::size_t taking_part(const Round& round) const { return taking_part(round.devices); }

  // Every process's status becomes the first failure among them, so all stop together.
  Status agree(const Status& st) {
    Status all;
    if (std::optional<std::string> failure = peers_.first_failure(st.failure())) {
      all.fail(std::move(*failure));
    }
    return all;
  }

  // The first kKeptMismatches of every process's, by rank.
  std::vector<Mismatch> kept_mismatches(const std::vector<Mismatch>& mine) {
    std::string bytes(mine.size() * sizeof(Mismatch), '\0');
    if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());
    std::vector<Mismatch> kept;
    for (const std::string& theirs : peers_.all_gather(bytes)) {
      for (std::size_t at = 0; at + sizeof(Mismatch) <= theirs.size() &&
                               kept.size() < kKeptMismatches;
           at += sizeof(Mismatch)) {
        std::memcpy(&kept.emplace_back(), theirs.data() + at, sizeof(Mismatch));
      }
    }
    return kept;
  }

  // The communicators of this process's devices among the first `size` devices.
  std::vector<ncclComm_t>* communicators(Status& st, std::int64_t size) {
    auto it = comms_.find(size);
    if (it != comms_.end()) return &it->second;
    std::vector<ncclComm_t> comms(taking_part(size));
    if (peers_.size() == 1) {
      std::vector<int> ids;
      for (std::int64_t g = 0; g < size; ++g) ids.push_back(devices_[g].id);
      st.nccl(ncclCommInitAll(comms.data(), static_cast<int>(size), ids.data()), "ncclCommInitAll");
    } else {
      ncclUniqueId id{};
      if (peers_.rank() == 0) st.nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      st = agree(st);
      if (st.ok()) peers_.broadcast(&id, sizeof id);
      if (st.ok() && !comms.empty()) {
        st.cuda(cudaSetDevice(devices_[0].id), "cudaSetDevice")
            .nccl(ncclCommInitRank(&comms[0], static_cast<int>(size), id,
                                   static_cast<int>(devices_[0].index)),
                  "ncclCommInitRank");
      }
    }
    st = agree(st);
    if (!st.ok()) return nullptr;
    return &comms_.emplace(size, std::move(comms)).first->second;
  }

  // The longest time between two events on the round's devices, in seconds, once every
  // process has got this far without a failure.
  Result<double> slowest(Status st, const Round& round, cudaEvent_t Device::*from,
                         cudaEvent_t Device::*to) {
    float longest = 0;
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      float ms = 0;
      st.cuda(cudaEventElapsedTime(&ms, devices_[i].*from, devices_[i].*to), "cudaEventElapsedTime");
      longest = std::max(longest, ms);
    }
    st = agree(st);
    if (!st.ok()) return st.error();
    return peers_.max(static_cast<double>(longest) / 1e3);
  }

  Status synchronize(Status st, const Round& round) {
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      st.cuda(cudaSetDevice(devices_[i].id), "cudaSetDevice")
          .cuda(cudaStreamSynchronize(devices_[i].stream), "cudaStreamSynchronize");
    }
    return st;
  }

  // Waits for the collective, giving up (and aborting the communicators) after the timeout.
  Status wait(Status st, const Round& round, std::vector<ncclComm_t>& comms, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (!st.ok()) return st;
      bool done = true;
      for (std::size_t g = 0; g < comms.size(); ++g) {
        const cudaError_t e = cudaEventQuery(devices_[g].stop);
        if (e == cudaErrorNotReady) {
          done = false;
        } else {
          st.cuda(e, what);
        }
        ncclResult_t async = ncclSuccess;
        st.nccl(ncclCommGetAsyncError(comms[g], &async), "ncclCommGetAsyncError").nccl(async, what);
      }
      if (done || !st.ok()) break;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (seconds > timeout_) {
        for (ncclComm_t c : comms) ncclCommAbort(c);
        comms_.erase(round.devices);
        return st.fail(std::string(what) + " did not finish within " + std::to_string(timeout_) +
                       " s; the NCCL communicators were aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return st;
  }

  std::vector<Device> devices_;  // this process's
  std::int64_t total_;            // in every process
  std::map<std::int64_t, std::vector<ncclComm_t>> comms_;  // by number of devices
  double timeout_;
  Peers& peers_;
  std::string name_;
  std::size_t min_free_ = 0;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_nccl_backend(int gpus, double timeout_seconds,
                                                   Peers& peers) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  std::optional<std::string> failure;
  if (e != cudaSuccess || count == 0) {
    failure = std::string("no CUDA device was found") +
              (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : std::string());
  } else if (peers.size() == 1 && gpus > count) {
    failure = "--gpus " + std::to_string(gpus) + " asks for more GPUs than the " +
              std::to_string(count) + " visible";
  } else if (peers.size() > 1 && count > 1 && peers.local_rank() >= count) {
    failure = "process " + std::to_string(peers.local_rank()) + " on its node has no GPU of its "
              "own (" + std::to_string(count) + " visible): start one process per GPU";
  }
  if (std::optional<std::string> first = peers.first_failure(failure)) return Error{*first};
  std::vector<int> ids;
  std::int64_t first = 0;
  std::int64_t total = 0;
  if (peers.size() == 1) {
    for (int i = 0; i < (gpus > 0 ? gpus : count); ++i) ids.push_back(i);
    total = static_cast<std::int64_t>(ids.size());
  } else {
    // One GPU visible: this process's own (srun --gpus-per-task 1, or CUDA_VISIBLE_DEVICES
    // per process); several: the node's, one per local rank.
    ids.push_back(count == 1 ? 0 : peers.local_rank());
    first = peers.rank();
    total = peers.size();
  }
  auto backend = std::make_unique<NcclBackend>(std::move(ids), first, total, timeout_seconds, peers);
  Status st = backend->init();
  if (!st.ok()) return st.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace paramlayout::verify
