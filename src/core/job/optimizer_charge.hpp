// Charging a planned job's buffers with the optimizer state Megatron-LM
// allocates on each rank's GPU, param by param (optimizer_state.hpp).
#pragma once

#include <span>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout {

/// Sets every chunk's buffers' optimizer bytes per rank, and the chunks'
/// totals, for the heaviest rank of each buffer: the distributed optimizer's
/// shards of sequential-dp buffers, the whole params each rank owns in
/// layerwise buffers, every param of unpadded ones; with
/// --optimizer-offload-fraction < 1, what HybridDeviceOptimizer keeps on the
/// GPU. Fails where Megatron-LM cannot build the optimizer or a figure does not
/// fit in 64 bits. `planned_as[i]`, where given, is the chunk whose plan chunk i shares under
/// its own names (relabel_plan; i itself when planned on its own): its state is that chunk's.
Result<void> charge_optimizer_state(const JobSpec& job, JobPlan& plan,
                                    std::span<const std::size_t> planned_as = {});

}  // namespace paramlayout

namespace paramlayout {

/// With --optimizer-cpu-offload and --optimizer-offload-fraction < 1: sets the
/// optimizer bytes of each chunk's buffers to what HybridDeviceOptimizer keeps
/// on the GPU of each optimizer's heaviest rank (optimizer_offload.cpp).
Result<void> charge_offload_kept(const JobSpec& job, JobPlan& plan);

}  // namespace paramlayout

namespace paramlayout {

/// Without the layer-wise param layout, the layer-wise optimizer deals whole params out to the
/// data-parallel ranks by size: sets the optimizer bytes of each chunk's buffers to the
/// heaviest rank's (optimizer_deal.cpp).
Result<void> charge_dealt_params(const JobSpec& job, JobPlan& plan);

}  // namespace paramlayout
