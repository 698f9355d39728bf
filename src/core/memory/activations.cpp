// Not modelled yet: every stage holds no activations.
#include "paramlayout/activations.hpp"

namespace paramlayout {

Result<std::vector<StageActivations>> estimate_activations(const JobSpec& job,
                                                           const JobPlan& /*plan*/) {
  std::vector<StageActivations> out;
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) out.push_back({stage, 0, {}});
  return out;
}

}  // namespace paramlayout
