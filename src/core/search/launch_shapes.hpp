// The launches a search tries: every combination of sizes the world allows, each with the
// arguments it adds to the user's line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/activation_options.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/search.hpp"

namespace paramlayout::search {

/// How the decoder layers are split over the stages, beyond an even split.
struct PipelineSplit {
  std::optional<std::int64_t> first_stage_layers;  ///< --decoder-first-pipeline-num-layers
  std::optional<std::int64_t> last_stage_layers;   ///< --decoder-last-pipeline-num-layers
  bool account_for_embedding_and_loss = false;     ///< --account-for-{embedding,loss}-in-...
  std::string layout;  ///< --pipeline-model-parallel-layout (sets vpp); "" for none

  bool operator==(const PipelineSplit&) const = default;
};

/// What decides a launch's layouts: one plan serves all its activation choices.
struct LaunchShape {
  std::int64_t tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1;
  PipelineSplit split;
  bool distributed_optimizer = false;
  std::int64_t optimizer_instances = 1;
};

/// What decides only the activations.
struct ActivationChoice {
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
};

/// A size combination refused before it is planned, and why.
struct EarlyRefusal {
  std::string reason;  ///< with its numbers
};

/// Every shape of `space` for the model and world of `base` (the user's line planned as
/// given), in a fixed order; refusals of whole size combinations by the rules that need no
/// plan (divisibility of the world, the sequence over context parallelism) go to `refused`,
/// each combination once.
std::vector<LaunchShape> launch_shapes(const JobSpec& base, const SearchSpace& space,
                                       const std::vector<bool>& given,
                                       std::vector<EarlyRefusal>& refused);

/// The activation choices to try with `shape`.
std::vector<ActivationChoice> activation_choices(const JobSpec& base, const SearchSpace& space,
                                                 const std::vector<bool>& given,
                                                 const LaunchShape& shape);

/// The arguments `shape` and `choice` add to the user's line (only the dimensions that vary,
/// and only values other than Megatron-LM's defaults).
std::vector<std::string> added_arguments(const LaunchShape& shape, const ActivationChoice& choice,
                                         const SearchSpace& space, const std::vector<bool>& given);

/// For each SearchDimension, whether the user's line `args` sets it.
Result<std::vector<bool>> dimensions_given(const std::vector<std::string>& args);

}  // namespace paramlayout::search
