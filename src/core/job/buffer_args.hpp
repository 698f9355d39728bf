// The launch's rotary and router arguments that decide the model's own persistent tensors,
// as Megatron-LM's validate_args and configs settle them.
#pragma once

#include "arg_map.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout::job {

/// Reads the rotary embedding's kind and size, rope fusion and the routers' load balancing
/// into job.buffers (and --moe-router-enable-expert-bias into job.model.moe); `hf`: the model
/// came from a Hugging Face config, whose rotary its position embedding says.
void read_buffer_args(ArgMap& args, JobSpec& job, bool hf);

}  // namespace paramlayout::job
