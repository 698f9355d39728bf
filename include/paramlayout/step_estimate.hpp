// What a training step sends per rank and how long it takes, for ranking launches of one
// model on one world against each other: the data-parallel collectives exact, from the
// layouts' padded buckets; tensor, context, expert and pipeline parallel traffic, compute
// and the pipeline bubble estimated from cited formulas (docs/search.md).
#pragma once

#include <cstdint>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout {

/// The machine a step's time is estimated for.
struct LinkModel {
  double intra_node_gbps = 3600;  ///< per GPU inside a node: NVLink 4, 450 GB/s each way
  double link_gbps = 400;         ///< per GPU between nodes: one 400 Gb/s NIC
  std::int64_t gpus_per_node = 8;
  double gpu_tflops = 400;  ///< achieved dense TFLOP/s per GPU
};

/// Bytes each rank of one pipeline stage sends per step, by kind of parallelism.
struct StepTraffic {
  std::int64_t data_parallel =
      0;  ///< exact: its buckets' reduce-scatters, all-gathers, all-reduces
  std::int64_t tensor_parallel = 0;   ///< estimate
  std::int64_t context_parallel = 0;  ///< estimate
  std::int64_t expert_parallel = 0;   ///< estimate
  std::int64_t pipeline = 0;          ///< estimate

  std::int64_t total() const;
  bool operator==(const StepTraffic&) const = default;
};

/// A step's estimated time on the stage whose communication takes longest.
struct StepEstimate {
  std::int64_t stage = 0;
  StepTraffic traffic;               ///< that stage's
  double communication_seconds = 0;  ///< its traffic over its links, nothing overlapped
  double compute_seconds = 0;        ///< 6 x active params x tokens over the world, recompute added
  double bubble_fraction = 0;        ///< (pp - 1) / (vpp x micro-batches)
  double bubble_seconds = 0;         ///< bubble_fraction x compute_seconds

  double step_seconds() const { return compute_seconds + communication_seconds + bubble_seconds; }
};

/// The step of `job` as `plan` lays out its buffers, on `links`. Fails when the job gives no
/// --seq-length (activations' traffic needs it) or a figure does not fit in 64 bits.
Result<StepEstimate> estimate_step(const JobSpec& job, const JobPlan& plan, const LinkModel& links);

}  // namespace paramlayout
