// The launch's precision, optimizer and DDP arguments, as Megatron-LM's validate_args and
// its optimizer config settle them (megatron/training/arguments.py, optimizer_config.py).
#pragma once

#include "arg_map.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout::job {

/// Reads --bf16/--fp16, --optimizer and its state, the distributed optimizer and the DDP
/// arguments into JOB. The optimizer decides the layout: the distributed optimizer shards
/// buffers (sequential-dp), Muon and the other emerging optimizers with it place matrices
/// whole (layerwise), and without it DDP packs buffers unpadded. job.parallel and job.dp must
/// be read first.
void read_optimizer_args(ArgMap& args, JobSpec& job);

}  // namespace paramlayout::job
