#include "nccl_comms.hpp"

#include <string>
#include <thread>
#include <utility>

namespace paramlayout::verify {

Communicators::Communicators(Communicators&& other) noexcept
    : comms_(std::exchange(other.comms_, {})), timeout_(other.timeout_) {}

Communicators::~Communicators() { destroy(); }

Status Communicators::init(const ncclUniqueId& id, int size, const std::vector<int>& cuda_ids,
                           int first_rank) {
  Status st;
  const Deadline deadline(timeout_);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::vector<ncclComm_t> comms(cuda_ids.size(), nullptr);
  // One thread joins several ranks: a group, so that no call waits for the next rank.
  st.nccl(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t i = 0; i < cuda_ids.size() && st.ok(); ++i) {
    st.cuda(cudaSetDevice(cuda_ids[i]), "cudaSetDevice")
        .nccl(
            ncclCommInitRankConfig(&comms[i], size, id, first_rank + static_cast<int>(i), &config),
            "ncclCommInitRankConfig");
  }
  const ncclResult_t end = ncclGroupEnd();
  for (ncclComm_t c : comms) {
    if (c != nullptr) comms_.push_back(c);
  }
  if (!st.ok()) {
    abort();
    return st;
  }
  if (comms_.size() != cuda_ids.size()) {
    abort();
    return st.nccl(end, "ncclGroupEnd (communicator creation)")
        .fail("NCCL created no communicator (ncclCommInitRankConfig)");
  }
  return settle(end, "ncclCommInitRankConfig", deadline);
}

Status Communicators::settle(ncclResult_t group_end, const char* what, const Deadline& deadline) {
  Status st;
  if (st.nccl(group_end, what, comms_.empty() ? nullptr : comms_[0]); !st.ok()) {
    abort();
    return st;
  }
  for (;;) {
    bool busy = false;
    for (ncclComm_t c : comms_) {
      ncclResult_t state = ncclSuccess;
      st.nccl(ncclCommGetAsyncError(c, &state), "ncclCommGetAsyncError", c).nccl(state, what, c);
      if (!st.ok()) break;
      busy = busy || state == ncclInProgress;
    }
    if (!st.ok()) {
      abort();
      return st;
    }
    if (!busy) return st;
    if (deadline.passed()) {
      abort();
      return st.fail(deadline.overrun(what));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Status Communicators::async_error(const char* what) {
  Status st;
  for (ncclComm_t c : comms_) {
    ncclResult_t state = ncclSuccess;
    st.nccl(ncclCommGetAsyncError(c, &state), "ncclCommGetAsyncError", c).nccl(state, what, c);
    if (!st.ok()) {
      abort();
      break;
    }
  }
  return st;
}

void Communicators::abort() {
  for (ncclComm_t c : comms_) ncclCommAbort(c);
  comms_.clear();
}

// Finalizes (the non-blocking way: issue, then poll) and destroys healthy communicators;
// aborts them instead when finalizing fails or overruns.
void Communicators::destroy() {
  if (comms_.empty()) return;
  const Deadline deadline(timeout_);
  Status st;
  for (ncclComm_t c : comms_) st.nccl(ncclCommFinalize(c), "ncclCommFinalize", c);
  if (!st.ok()) {
    abort();
    return;
  }
  if (settle(ncclSuccess, "ncclCommFinalize", deadline).ok()) {
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
    comms_.clear();
  }
}

}  // namespace paramlayout::verify
