// The processes one verify run spans: this process alone, or one process per GPU started by
// an MPI launcher (mpirun, srun), which bootstrap NCCL together (ncclGetUniqueId on rank 0,
// broadcast, ncclCommInitRank) as nccl-tests does. Every process runs the same harness on the
// same rounds; the backend agrees on failures and combines results through Peers, so every
// process reaches the same verdict and only rank 0 reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"

namespace paramlayout::verify {

class Peers {
 public:
  virtual ~Peers() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This process's place among those on its node: which GPU it takes.
  virtual int local_rank() const = 0;
  /// The lowest failing rank's message, on every process; nothing when none failed. A
  /// process that fails alone would leave the others waiting in the next collective.
  virtual std::optional<std::string> first_failure(const std::optional<std::string>& mine) = 0;
  virtual std::int64_t sum(std::int64_t value) = 0;
  virtual double max(double value) = 0;
  /// Rank 0's `size` bytes at `data`, on every process.
  virtual void broadcast(void* data, std::size_t size) = 0;
  /// Every process's bytes, by rank, on every process.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

/// This process alone.
std::unique_ptr<Peers> solo_peers();

/// The number of processes an MPI launcher started (from its environment: Open MPI, PMI,
/// PMIx, Slurm's srun), or 1.
int launched_processes();

/// The processes this one was started with: MPI's when launched as one of several (MPI is
/// initialized here and finalized when the Peers go), else this process alone. Fails when
/// several were launched but this build has no MPI.
Result<std::unique_ptr<Peers>> join_peers();

}  // namespace paramlayout::verify
