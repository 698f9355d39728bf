// The first CUDA or NCCL failure of a sequence of calls, with what was being done, and the
// deadline that NCCL calls are waited for under. Shared by the nccl backend's parts.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "paramlayout/error.hpp"

namespace paramlayout::verify {

/// The first CUDA or NCCL failure; callers skip later calls once one is recorded.
class Status {
 public:
  bool ok() const { return message_.empty(); }
  Status& cuda(cudaError_t e, const char* what) {
    if (ok() && e != cudaSuccess) {
      message_ = std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e);
    }
    return *this;
  }
  /// An NCCL result; `comm`, where given, adds NCCL's own account of the failure.
  Status& nccl(ncclResult_t e, const char* what, ncclComm_t comm = nullptr) {
    if (ok() && e != ncclSuccess && e != ncclInProgress) {
      message_ = std::string("NCCL error in ") + what + ": " + ncclGetErrorString(e);
      const char* detail = ncclGetLastError(comm);
      if (detail != nullptr && *detail != '\0') message_ += std::string(" (") + detail + ")";
    }
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

/// A point in time `seconds` from its making.
class Deadline {
 public:
  explicit Deadline(double seconds)
      : seconds_(seconds),
        at_(std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(seconds))) {}
  bool passed() const { return std::chrono::steady_clock::now() > at_; }
  /// "WHAT did not finish within S s (--timeout); ...": what an overrun reports.
  std::string overrun(const char* what) const {
    std::string s = std::to_string(seconds_);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return std::string(what) + " did not finish within " + s +
           " s (--timeout); the NCCL communicators were aborted";
  }

 private:
  double seconds_;
  std::chrono::steady_clock::time_point at_;
};

}  // namespace paramlayout::verify
