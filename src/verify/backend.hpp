// The small interface between the verify harness and the machines it runs on.
//
// A bucket is sharded over dp ranks; a backend drives G devices (dp divisible by G), each
// standing for dp / G consecutive ranks. Each round moves one chunk of a bucket: every
// device block (the bucket slice its ranks own, block = bucket / G elements) contributes
// `length` consecutive elements starting `offset` into the block.
//  - grads: every device sends G * length elements (the chunk of every block) holding the
//    sum of its ranks' contributions, and receives its own `length` reduced elements;
//  - params: every device sends its own `length` elements and receives all G * length.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "peers.hpp"
#include "values.hpp"

namespace paramlayout::verify {

/// Consecutive positions of a round buffer holding one param's elements (or padding).
struct Segment {
  std::int64_t begin = 0;  ///< position in the buffer
  std::int64_t length = 0;
  std::int64_t param = -1;   ///< param id (its manifest position), -1 for padding
  std::int64_t element = 0;  ///< the param's element at `begin`
};

enum class RoundKind : std::uint8_t { grads, params };

/// One collective over one chunk of one bucket.
struct Round {
  RoundKind kind = RoundKind::grads;
  Encoding encoding = Encoding::float32;
  std::int64_t dp = 1;
  std::int64_t devices = 1;
  std::int64_t length = 0;  ///< elements per device block in this chunk
  /// The G * length positions every device shares: the send buffer of a grads round, the
  /// receive buffer of a params round.
  std::vector<Segment> all_blocks;
  /// Per device, its own `length` positions: the receive buffer of a grads round, the
  /// send buffer of a params round.
  std::vector<std::vector<Segment>> own_block;

  std::int64_t ranks_per_device() const { return dp / devices; }
};

/// A received element that differs from what was expected.
struct Mismatch {
  std::int64_t device = 0;
  std::int64_t position = 0;  ///< in the device's receive buffer
  std::int64_t param = -1;
  std::int64_t element = 0;
  std::uint32_t expected = 0;  ///< bits
  std::uint32_t received = 0;  ///< bits
};

struct CheckResult {
  double seconds = 0;  ///< the comparison's own time, the slowest device's
  std::int64_t mismatches = 0;
  std::vector<Mismatch> first;  ///< at most kKeptMismatches, in no particular order
};

inline constexpr std::size_t kKeptMismatches = 10;

class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu, 4 simulated devices", "nccl 2.28.9, 8 x NVIDIA H100 80GB HBM3".
  virtual std::string describe() const = 0;
  virtual std::int64_t devices() const = 0;
  /// Elements per device block that fit the backend's memory budget.
  virtual std::int64_t preferred_block_elements() const = 0;
  /// Makes room for rounds of up to `length` elements per block of up to 4-byte elements.
  virtual Result<void> reserve(std::int64_t length) = 0;
  /// Fills each device's send buffer with the round's values and poisons its receive
  /// buffer; returns the seconds it took, the slowest device's.
  virtual Result<double> fill(const Round& round) = 0;
  /// Runs the round's collective (a sum reduce-scatter or an all-gather); returns the
  /// seconds it took, the slowest device's.
  virtual Result<double> collective(const Round& round) = 0;
  /// Compares every device's receive buffer with the expected values.
  virtual Result<CheckResult> check(const Round& round) = 0;
};

/// All ranks in this process, in host memory: the reference semantics. `devices` simulated
/// devices (dividing dp) exercise the same block geometry as GPUs do.
std::unique_ptr<Backend> make_cpu_backend(std::int64_t devices);

/// Real CUDA buffers and NCCL: over up to `gpus` visible GPUs (0: all) when `peers` is this
/// process alone, else over one GPU per process (its local rank's). Fails with a message
/// when no CUDA device is visible or this build has no CUDA/NCCL; under several processes
/// every one fails alike, so none is left waiting.
Result<std::unique_ptr<Backend>> make_nccl_backend(int gpus, double timeout_seconds, Peers& peers);

/// The rule for the values device `device` sends in segment `s` of a round.
ValueRule sent_values(const Round& round, std::int64_t device, const Segment& s);
/// The rule for the values expected where segment `s` of a round is received.
ValueRule expected_values(const Round& round, const Segment& s);

}  // namespace paramlayout::verify
