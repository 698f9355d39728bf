// The launch's batch, sequence and recompute arguments, as Megatron-LM's validate_args
// settles them (megatron/training/arguments.py).
#pragma once

#include "arg_map.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout::job {

/// Reads --micro-batch-size, --global-batch-size, --seq-length, --sequence-parallel and the
/// recompute arguments into job.activations; job.parallel and job.dp must be read first.
void read_activation_args(ArgMap& args, JobSpec& job);

}  // namespace paramlayout::job
