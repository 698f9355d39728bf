// Every launch of one model on N GPUs: the sizes a launch line leaves open (tp, pp, vpp, cp,
// ep, etp, the pipeline split, sequence parallelism, recompute, the distributed optimizer)
// varied over what Megatron-LM accepts, each candidate planned as `job` plans it, and ranked.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/rank_memory.hpp"
#include "paramlayout/step_estimate.hpp"

namespace paramlayout {

/// What a search may vary. A dimension the launch line already gives is fixed.
enum class SearchDimension : std::uint8_t {
  tp,
  pp,
  vpp,
  cp,
  ep,
  etp,
  split,
  sequence_parallel,
  recompute,
  distributed_optimizer,
  optimizer_instances,
};
inline constexpr std::size_t kSearchDimensions = 11;

/// "tp", "pp", ..., "split", "sequence-parallel", "recompute", "distributed-optimizer",
/// "optimizer-instances".
std::string_view to_string(SearchDimension dimension);
std::optional<SearchDimension> parse_search_dimension(std::string_view name);

/// The values a search tries.
struct SearchSpace {
  /// Sizes to try; empty: every divisor of the world size (vpp: every count of virtual
  /// stages the split allows).
  std::vector<std::int64_t> tp, pp, vpp, cp, ep, etp;
  std::int64_t max_pp = 0;  ///< 0: no limit beyond the layers
  /// The largest tp and etp tried when their lists are empty (0: no limit): a node's GPUs.
  std::int64_t max_tensor_parallel = 0;
  /// Dimensions not varied: with their Megatron-LM default unless the launch line sets them.
  std::vector<SearchDimension> fixed{SearchDimension::distributed_optimizer,
                                     SearchDimension::optimizer_instances};

  bool varies(SearchDimension dimension) const;
};

/// One launch that Megatron-LM accepts, planned.
struct SearchCandidate {
  std::vector<std::string> added_args;  ///< appended to the user's arguments: the launch line
  ParallelConfig parallel;              ///< tp, pp, vpp, cp, ep, etp
  std::int64_t dp = 1;
  std::int64_t expert_dp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  bool distributed_optimizer = false;
  std::int64_t optimizer_instances = 1;  ///< --num-distributed-optimizer-instances
  RankMemory heaviest;                   ///< the stage whose peak is the largest
  StepEstimate step;
};

/// Candidates refused for one reason (numbers in the reason read N).
struct RejectedReason {
  std::string reason;
  std::int64_t count = 0;
  std::string example;  ///< the first refusal, as Megatron-LM's rules word it, with its sizes
};

/// Everything a search tried.
struct SearchResult {
  std::vector<SearchCandidate> candidates;  ///< in the order they were tried
  std::vector<RejectedReason> rejected;     ///< most frequent first
  std::int64_t planned = 0;                 ///< launches planned (candidates among them)
  bool interrupted = false;                 ///< stopped before every launch was tried
};

/// The launch line and the space to search.
struct SearchRequest {
  std::vector<std::string> args;  ///< Megatron-LM's arguments the user fixes
  std::int64_t world_size = 1;
  const HfModel* hf = nullptr;
  FileReader files;  ///< called from several threads, one at a time
  std::string model_name = "model";
  SearchSpace space;
  LinkModel links;
  int threads = 1;
};

/// Called now and then from the thread that searches: launches tried so far, and in all.
using SearchProgress = std::function<void(std::int64_t done, std::int64_t total)>;

/// Tries every launch of `request`'s space. Fails when the user's own line is refused (or
/// gives no --seq-length); a candidate Megatron-LM would refuse is counted in `rejected`.
/// Setting `stop` ends it early with what was planned so far.
Result<SearchResult> search_launches(const SearchRequest& request,
                                     const SearchProgress& progress = {},
                                     const std::atomic<bool>* stop = nullptr);

/// What ranks the candidates that fit (and then those that do not).
enum class RankBy : std::uint8_t { time, memory, traffic, bubble };
std::optional<RankBy> parse_rank_by(std::string_view name);

/// Orders `candidates`: those whose peak plus `headroom` fits in `gpu_bytes` first (all of
/// them without a GPU), each group by `rank_by` (time: the step estimate; memory: the peak;
/// traffic: bytes sent per step; bubble: its share), ties by fewer model-parallel ranks.
void rank_candidates(std::vector<SearchCandidate>& candidates,
                     std::optional<std::int64_t> gpu_bytes, std::int64_t headroom, RankBy rank_by);

/// Whether a candidate's peak plus `headroom` fits in `gpu_bytes`.
bool fits(const SearchCandidate& candidate, std::int64_t gpu_bytes, std::int64_t headroom);

}  // namespace paramlayout

namespace paramlayout {

/// The GPU a search holds candidates against.
struct SearchBudget {
  std::optional<std::int64_t> gpu_bytes;  ///< nullopt: no GPU named
  std::string gpu_name;                   ///< "H100", or "" for a size in GiB
  std::int64_t headroom = 0;
};

/// The search as one JSON object (no newline), as `search --json` prints it: the world, the
/// counts, the links, every candidate in `result`'s order with its launch line, sizes,
/// memory, traffic and estimate, and the refusals by reason (formats.md).
std::string search_to_json(const SearchRequest& request, const SearchResult& result,
                           const SearchBudget& budget, RankBy rank_by);

}  // namespace paramlayout
