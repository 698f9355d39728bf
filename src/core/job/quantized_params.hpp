// FP8 params (--fp8-param-gather) as Megatron-LM and Transformer Engine build them.
#pragma once

#include "arg_map.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout::job {

/// Reads --fp8-param-gather / --fp4-param-gather, --fp8-format, --fp8-recipe and the
/// first/last-layers-in-bf16 options into job.quantized (and the optimizer's view of them),
/// refusing what Megatron-LM refuses and what paramlayout does not model.
void read_quantized_params(ArgMap& args, JobSpec& job);

}  // namespace paramlayout::job
