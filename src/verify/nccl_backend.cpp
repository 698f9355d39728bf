// The nccl backend: real CUDA buffers on every visible GPU, NCCL collectives among them,
// fill and check as kernels (nccl_kernels.cu). Only mismatch counts and the first few
// mismatches come back to the host. One process drives all its GPUs, or, under an MPI
// launcher, each process drives one; either way rank 0's ncclUniqueId joins them, on
// non-blocking communicators (nccl_comms.hpp) that a failure or --timeout aborts. A device
// stands for dp / G consecutive ranks, so its send buffer holds the sum of their
// contributions.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "nccl_comms.hpp"
#include "nccl_kernels.hpp"

namespace paramlayout::verify {
namespace {

ncclDataType_t nccl_type(Encoding e) {
  switch (e) {
    case Encoding::float32:
      return ncclFloat32;
    case Encoding::bfloat16:
      return ncclBfloat16;
    case Encoding::float16:
      return ncclFloat16;
    case Encoding::uint8:
      return ncclUint8;
  }
  return ncclUint8;
}

/// "2.28.9", the NCCL library this process loaded.
std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "?";
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

/// One GPU this process drives, with its streams, events and buffers.
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
  DeviceSegments uploaded;
  DeviceResult* result = nullptr;
  std::vector<std::int64_t> host_tiles;

  void release() {
    cudaSetDevice(id);
    cudaFree(send);
    cudaFree(recv);
    cudaFree(segments);
    cudaFree(tile_start);
    cudaFree(result);
    if (stream) cudaStreamDestroy(stream);
    for (cudaEvent_t e : {start, stop, work_start, work_stop}) {
      if (e) cudaEventDestroy(e);
    }
  }

  // Copies the segments and the prefix sums of their tiles to the device.
  void upload(Status& st, const std::vector<Segment>& list) {
    host_tiles.resize(list.size());
    std::int64_t tiles = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      host_tiles[i] = tiles;
      tiles += (list[i].length + kTile - 1) / kTile;
    }
    if (list.size() > segment_capacity) {
      cudaFree(segments);
      cudaFree(tile_start);
      segments = nullptr;
      tile_start = nullptr;
      segment_capacity = std::max<std::size_t>(list.size(), 2 * segment_capacity);
      st.cuda(cudaMalloc(&segments, segment_capacity * sizeof(Segment)), "cudaMalloc (segments)")
          .cuda(cudaMalloc(&tile_start, segment_capacity * sizeof(std::int64_t)),
                "cudaMalloc (tiles)");
    }
    uploaded = DeviceSegments{segments, tile_start, static_cast<int>(list.size()), tiles};
    // Pageable copies on the stream: staged before they return, ordered before the kernel.
    st.cuda(cudaMemcpyAsync(segments, list.data(), list.size() * sizeof(Segment),
                            cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (segments)")
        .cuda(cudaMemcpyAsync(tile_start, host_tiles.data(), list.size() * sizeof(std::int64_t),
                              cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync (tiles)");
  }
};

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
    comms_.clear();  // before the buffers their collectives may still use
    for (Device& d : devices_) d.release();
  }

  Status init() {
    Status st;
    for (Device& d : devices_) {
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice")
          .cuda(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      for (cudaEvent_t* e : {&d.start, &d.stop, &d.work_start, &d.work_stop}) {
        st.cuda(cudaEventCreate(e), "cudaEventCreate");
      }
      st.cuda(cudaMalloc(&d.result, sizeof(DeviceResult)), "cudaMalloc");
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
    const std::string nccl = "nccl " + nccl_version();
    if (peers_.size() > 1) {
      return nccl + " over MPI, " + std::to_string(total_) + " processes x " + name_;
    }
    return nccl + ", " + std::to_string(total_) + " x " + name_;
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
    const std::size_t bytes =
        static_cast<std::size_t>(length) * static_cast<std::size_t>(total_) * 4;
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
      d.upload(st, sent);
      st.cuda(cudaEventRecord(d.work_start, d.stream), "cudaEventRecord")
          .cuda(cudaMemsetAsync(d.recv, 0xFF, received, d.stream), "cudaMemsetAsync (poison)");
      if (!st.ok()) break;
      st.cuda(launch_fill(d.uploaded, !grads, round.encoding, round.dp, d.index * per_device,
                          (d.index + 1) * per_device, d.send, d.stream),
              "the fill kernel")
          .cuda(cudaEventRecord(d.work_stop, d.stream), "cudaEventRecord");
    }
    st = synchronize(st, round);
    return slowest(st, round, &Device::work_start, &Device::work_stop);
  }

  Result<double> collective(const Round& round) override {
    Status st;
    Communicators* comms = communicators(st, round.devices);
    if (!st.ok()) return st.error();
    const bool grads = round.kind == RoundKind::grads;
    const char* what = grads ? "ncclReduceScatter" : "ncclAllGather";
    const std::size_t bytes =
        static_cast<std::size_t>(round.length * encoding_bytes(round.encoding));
    const Deadline deadline(timeout_);
    st.nccl(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t g = 0; g < comms->size() && st.ok(); ++g) {
      Device& d = devices_[g];
      st.cuda(cudaSetDevice(d.id), "cudaSetDevice")
          .cuda(cudaEventRecord(d.start, d.stream), "cudaEventRecord");
      if (grads) {
        st.nccl(ncclReduceScatter(d.send, d.recv, static_cast<std::size_t>(round.length),
                                  nccl_type(round.encoding), ncclSum, (*comms)[g], d.stream),
                what, (*comms)[g]);
      } else {
        st.nccl(ncclAllGather(d.send, d.recv, bytes, ncclUint8, (*comms)[g], d.stream), what,
                (*comms)[g]);
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (st.ok()) st = comms->settle(end, what, deadline);
    // Only once NCCL has taken the calls in are they on the streams, ahead of these events.
    for (std::size_t g = 0; g < comms->size() && st.ok(); ++g) {
      st.cuda(cudaSetDevice(devices_[g].id), "cudaSetDevice")
          .cuda(cudaEventRecord(devices_[g].stop, devices_[g].stream), "cudaEventRecord");
    }
    if (st.ok()) st = wait(*comms, what, deadline);
    if (!st.ok()) forget(round.devices);
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
      d.upload(st, received);
      st.cuda(cudaEventRecord(d.work_start, d.stream), "cudaEventRecord");
      if (!st.ok()) break;
      st.cuda(launch_check(d.uploaded, !grads, round.encoding, round.dp, d.index, d.recv, d.result,
                           d.stream),
              "the check kernel")
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
                                devices_[i].stream),
                "cudaMemcpyAsync (check result)")
          .cuda(cudaStreamSynchronize(devices_[i].stream), "cudaStreamSynchronize");
      result.mismatches += static_cast<std::int64_t>(r.mismatches);
      const auto kept =
          static_cast<std::size_t>(std::min<unsigned long long>(r.kept, kKeptMismatches));
      first.insert(first.end(), r.first, r.first + kept);
    }
    st = agree(st);
    if (!st.ok()) return st.error();
    result.mismatches = peers_.sum(result.mismatches);
    result.first = kept_mismatches(first);
    return result;
  }

 private:
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
      for (std::size_t at = 0;
           at + sizeof(Mismatch) <= theirs.size() && kept.size() < kKeptMismatches;
           at += sizeof(Mismatch)) {
        std::memcpy(&kept.emplace_back(), theirs.data() + at, sizeof(Mismatch));
      }
    }
    return kept;
  }

  // The communicators of this process's devices among the first `size` devices, made on
  // first use: rank 0's ncclUniqueId, shared with every process, joins them.
  Communicators* communicators(Status& st, std::int64_t size) {
    auto it = comms_.find(size);
    if (it != comms_.end()) return &it->second;
    ncclUniqueId id{};
    if (peers_.rank() == 0) st.nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    st = agree(st);
    if (st.ok() && peers_.size() > 1) peers_.broadcast(&id, sizeof id);
    Communicators comms(timeout_);
    if (st.ok()) {
      std::vector<int> ids;
      for (std::size_t g = 0; g < taking_part(size); ++g) ids.push_back(devices_[g].id);
      if (!ids.empty()) {
        st = comms.init(id, static_cast<int>(size), ids, static_cast<int>(devices_[0].index));
      }
    }
    st = agree(st);
    if (!st.ok()) return nullptr;
    return &comms_.emplace(size, std::move(comms)).first->second;
  }

  // Aborted communicators are dropped; the next round of that size makes new ones.
  void forget(std::int64_t size) {
    auto it = comms_.find(size);
    if (it == comms_.end()) return;
    it->second.abort();
    comms_.erase(it);
  }

  // The longest time between two events on the round's devices, in seconds, once every
  // process has got this far without a failure.
  Result<double> slowest(Status st, const Round& round, cudaEvent_t Device::*from,
                         cudaEvent_t Device::*to) {
    float longest = 0;
    for (std::size_t i = 0; i < taking_part(round) && st.ok(); ++i) {
      float ms = 0;
      st.cuda(cudaEventElapsedTime(&ms, devices_[i].*from, devices_[i].*to),
              "cudaEventElapsedTime");
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

  // Waits for the collective's stop events, watching NCCL for asynchronous errors; gives up
  // at the deadline (the communicators are then aborted).
  Status wait(Communicators& comms, const char* what, const Deadline& deadline) {
    for (;;) {
      Status st;
      bool done = true;
      for (std::size_t g = 0; g < comms.size() && st.ok(); ++g) {
        const cudaError_t e = cudaEventQuery(devices_[g].stop);
        if (e == cudaErrorNotReady) {
          done = false;
        } else {
          st.cuda(e, what);
        }
      }
      if (st.ok()) st = comms.async_error(what);
      if (done || !st.ok()) return st;
      if (deadline.passed()) {
        comms.abort();
        return st.fail(deadline.overrun(what));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::vector<Device> devices_;                  // this process's
  std::int64_t total_;                           // in every process
  std::map<std::int64_t, Communicators> comms_;  // by number of devices
  double timeout_;
  Peers& peers_;
  std::string name_;
  std::size_t min_free_ = 0;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_nccl_backend(int gpus, double timeout_seconds, Peers& peers) {
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
    failure = "process " + std::to_string(peers.local_rank()) +
              " on its node has no GPU of its "
              "own (" +
              std::to_string(count) + " visible): start one process per GPU";
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
  auto backend =
      std::make_unique<NcclBackend>(std::move(ids), first, total, timeout_seconds, peers);
  Status st = backend->init();
  if (!st.ok()) return st.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace paramlayout::verify
