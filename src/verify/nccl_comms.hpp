// NCCL communicators that never leave the caller waiting: they are non-blocking
// (ncclConfig_t blocking = 0), so every NCCL call returns at once and is then polled under a
// deadline. A failure or an overrun aborts them (ncclCommAbort); a healthy set is finalized
// and destroyed, again under the deadline. A broken communicator is never destroyed.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

#include "cuda_status.hpp"

namespace paramlayout::verify {

class Communicators {
 public:
  /// Communicators time out after `timeout` seconds per NCCL operation.
  explicit Communicators(double timeout) : timeout_(timeout) {}
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  Communicators(Communicators&& other) noexcept;
  Communicators& operator=(Communicators&&) = delete;
  ~Communicators();

  /// Joins the CUDA devices `cuda_ids` to the communicator `id` of `size` ranks, as ranks
  /// `first_rank`, `first_rank` + 1, ...; waits for every one to be ready.
  Status init(const ncclUniqueId& id, int size, const std::vector<int>& cuda_ids, int first_rank);

  /// After a group of calls was issued (ncclGroupEnd returned `group_end`): waits until
  /// every communicator has taken them in, or fails (and aborts) on an error or the deadline.
  Status settle(ncclResult_t group_end, const char* what, const Deadline& deadline);

  /// The first asynchronous error any communicator reports, or ok; aborts on an error.
  Status async_error(const char* what);

  /// Aborts every communicator (what a failure or an overrun calls for).
  void abort();

  std::size_t size() const { return comms_.size(); }
  ncclComm_t operator[](std::size_t i) const { return comms_[i]; }
  double timeout() const { return timeout_; }

 private:
  void destroy();

  std::vector<ncclComm_t> comms_;
  double timeout_;
};

}  // namespace paramlayout::verify
