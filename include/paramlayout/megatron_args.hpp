// Megatron-LM's training arguments -> a job: the parallel sizes, the pipeline split, the
// optimizer and DDP settings and (without a Hugging Face config) the model, with
// Megatron-LM's defaults and derived values (megatron/training/arguments.py,
// megatron/core/parallel_state.py).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/job.hpp"

namespace paramlayout {

/// The text of a file the launch line names (a tokenizer's vocabulary or model), or nullopt
/// when it is not there to read.
using FileReader = std::function<std::optional<std::string>(const std::string& path)>;

/// Reads `args` as a launch script passes them to pretrain_gpt.py (or pretrain_mamba.py) on
/// `world_size` ranks. With `hf`, the model's shapes come from its config and model
/// arguments in `args` must agree with it. Arguments that do not change the layout are
/// listed in JobSpec::ignored_arguments; ones that change it in ways paramlayout does not
/// model are errors that say so. Tokenizer files the line names are read with `files` (none
/// without it).
Result<JobSpec> job_from_megatron_args(const std::vector<std::string>& args,
                                       std::int64_t world_size, const HfModel* hf,
                                       const FileReader& files = {});

}  // namespace paramlayout
