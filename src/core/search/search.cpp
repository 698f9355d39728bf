// A search: the user's line planned as given, then every shape of its space planned once on
// one of the threads, each with its activation choices, through the path `job` takes.
#include "paramlayout/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include "launch_shapes.hpp"

namespace paramlayout {
namespace {

using search::ActivationChoice;
using search::LaunchShape;

constexpr std::array<std::string_view, kSearchDimensions> kDimensionNames{"tp",
                                                                          "pp",
                                                                          "vpp",
                                                                          "cp",
                                                                          "ep",
                                                                          "etp",
                                                                          "split",
                                                                          "sequence-parallel",
                                                                          "recompute",
                                                                          "distributed-optimizer",
                                                                          "optimizer-instances"};

/// A refusal's reason with its numbers as N, so that refusals for one reason count together.
std::string reason_of(std::string_view message) {
  std::string out;
  for (std::size_t i = 0; i < message.size(); ++i) {
    if (message[i] >= '0' && message[i] <= '9') {
      if (out.empty() || out.back() != 'N') out.push_back('N');
      while (i + 1 < message.size() && message[i + 1] >= '0' && message[i + 1] <= '9') ++i;
    } else {
      out.push_back(message[i]);
    }
  }
  return out;
}

/// What one shape gave: its candidates and its refusals, in the order tried.
struct ShapeOutcome {
  std::vector<SearchCandidate> candidates;
  std::vector<std::string> refusals;
  std::int64_t planned = 0;
};

/// MoE layers under tensor parallelism without sequence parallelism: training's first forward
/// raises (moe_layer.py:636-640).
std::optional<std::string> moe_problem(const ModelSpec& model, std::int64_t tp,
                                       bool sequence_parallel) {
  if (model.moe.num_experts == 0 || tp == 1 || sequence_parallel) return std::nullopt;
  return std::string(
      "MoE layers under tensor parallelism need --sequence-parallel: "
      "training's first forward raises without it (moe_layer.py:636-640)");
}

/// The start-up checks a plan does not make: Megatron-LM refuses these before step 1.
std::optional<std::string> start_up_problem(const JobSpec& job) {
  const ActivationOptions& a = job.activations;
  const std::int64_t per_step = a.micro_batch_size * job.dp;
  if (a.global_batch_size % per_step != 0) {
    return fmt::format(
        "--global-batch-size {} is not a multiple of micro batch x dp = {} x {} "
        "(num_microbatches_calculator.py:382)",
        a.global_batch_size, a.micro_batch_size, job.dp);
  }
  const std::int64_t m = a.global_batch_size / per_step;
  if (job.parallel.vpp > 1 && (m < job.parallel.pp || m % job.parallel.pp != 0)) {
    return fmt::format(
        "the interleaved schedule needs micro-batches ({}) to be a multiple of "
        "pp ({}) (schedules.py:1160-1179)",
        m, job.parallel.pp);
  }
  return std::nullopt;
}

bool same_but_cp(const LaunchShape& a, const LaunchShape& b) {
  return a.tp == b.tp && a.pp == b.pp && a.vpp == b.vpp && a.ep == b.ep && a.etp == b.etp &&
         a.split == b.split && a.distributed_optimizer == b.distributed_optimizer &&
         a.optimizer_instances == b.optimizer_instances;
}

class Searcher {
 public:
  Searcher(const SearchRequest& request, const std::vector<bool>& given, const JobSpec& base)
      : request_(request), given_(given), base_(base) {}

  /// Shapes that differ only in cp: one plan serves them all.
  ShapeOutcome evaluate(const LaunchShape* shapes, std::size_t count) const {
    ShapeOutcome out;
    std::optional<JobPlan> plan;
    std::optional<std::string> plan_refused;
    for (std::size_t s = 0; s < count; ++s) {
      const std::size_t first = out.candidates.size();
      for (const ActivationChoice& choice :
           search::activation_choices(base_, request_.space, given_, shapes[s])) {
        if (plan_refused) {
          out.refusals.push_back(*plan_refused);
          break;
        }
        // Refused whatever the line: no need to read it.
        if (std::optional<std::string> moe =
                moe_problem(base_.model, shapes[s].tp, choice.sequence_parallel)) {
          out.refusals.push_back(*moe);
          continue;
        }
        evaluate_choice(shapes[s], choice, plan, plan_refused, out);
      }
      drop_needless_recompute(out.candidates, first);
    }
    return out;
  }

 private:
  void evaluate_choice(const LaunchShape& shape, const ActivationChoice& choice,
                       std::optional<JobPlan>& plan, std::optional<std::string>& plan_refused,
                       ShapeOutcome& out) const {
    std::vector<std::string> added = search::added_arguments(shape, choice, request_.space, given_);
    std::vector<std::string> line = request_.args;
    line.insert(line.end(), added.begin(), added.end());
    Result<JobSpec> spec =
        job_from_megatron_args(line, request_.world_size, request_.hf, request_.files);
    if (!spec) {
      out.refusals.push_back(spec.error().message);
      return;
    }
    spec->model_name = request_.model_name;
    if (std::optional<std::string> problem = start_up_problem(*spec)) {
      out.refusals.push_back(*problem);
      return;
    }
    if (!plan) {
      Result<JobPlan> planned = plan_job(*spec, JobPlanUse::figures);
      ++out.planned;
      if (!planned) {
        plan_refused = planned.error().message;
        out.refusals.push_back(*plan_refused);
        return;
      }
      plan = std::move(*planned);
    }
    Result<std::vector<RankMemory>> memory = rank_memory(*spec, *plan);
    if (!memory) {
      out.refusals.push_back(memory.error().message);
      return;
    }
    Result<StepEstimate> step = estimate_step(*spec, *plan, request_.links);
    if (!step) {
      out.refusals.push_back(step.error().message);
      return;
    }
    SearchCandidate& c = out.candidates.emplace_back();
    c.added_args = std::move(added);
    c.parallel = spec->parallel;
    c.dp = spec->dp;
    c.expert_dp = spec->expert_dp;
    c.sequence_parallel = spec->activations.sequence_parallel;
    c.recompute = spec->activations.recompute;
    c.distributed_optimizer = spec->strategy != Strategy::unpadded;
    c.optimizer_instances = spec->optimizer_instances;
    c.heaviest = (*memory)[static_cast<std::size_t>(heaviest_peak_stage(*memory))];
    c.step = *step;
  }

  /// Of one shape's candidates from `first` on: drops those that recompute more than another
  /// with the same sequence parallelism for no smaller peak (they only cost compute).
  static void drop_needless_recompute(std::vector<SearchCandidate>& candidates, std::size_t first) {
    const auto needless = [&](const SearchCandidate& c) {
      for (std::size_t i = first; i < candidates.size(); ++i) {
        const SearchCandidate& o = candidates[i];
        if (o.sequence_parallel == c.sequence_parallel && o.recompute < c.recompute &&
            o.heaviest.peak_bytes <= c.heaviest.peak_bytes) {
          return true;
        }
      }
      return false;
    };
    std::vector<SearchCandidate> kept;
    for (std::size_t i = first; i < candidates.size(); ++i) {
      if (!needless(candidates[i])) kept.push_back(candidates[i]);
    }
    candidates.resize(first);
    std::move(kept.begin(), kept.end(), std::back_inserter(candidates));
  }

  const SearchRequest& request_;
  const std::vector<bool>& given_;
  const JobSpec& base_;
};

/// Runs `work` on each index in [0, n) over `threads` threads, reporting progress and
/// stopping early from the calling thread.
template <typename Work>
std::int64_t run_all(std::int64_t n, int threads, const Work& work, const SearchProgress& progress,
                     const std::atomic<bool>* stop) {
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> halt{false};
  const auto worker = [&] {
    for (std::int64_t i = next++; i < n && !halt; i = next++) {
      work(i);
      ++done;
    }
  };
  std::vector<std::jthread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  std::jthread reporter([&](std::stop_token token) {
    while (!token.stop_requested() && done < n) {
      if (stop != nullptr && *stop) halt = true;
      if (progress) progress(done, n);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  worker();
  for (std::jthread& t : pool) t.join();
  reporter.request_stop();
  reporter.join();
  return done;
}

}  // namespace

std::string_view to_string(SearchDimension dimension) {
  return kDimensionNames[static_cast<std::size_t>(dimension)];
}

std::optional<SearchDimension> parse_search_dimension(std::string_view name) {
  for (std::size_t i = 0; i < kDimensionNames.size(); ++i) {
    if (kDimensionNames[i] == name) return static_cast<SearchDimension>(i);
  }
  return std::nullopt;
}

bool SearchSpace::varies(SearchDimension dimension) const {
  return std::find(fixed.begin(), fixed.end(), dimension) == fixed.end();
}

Result<SearchResult> search_launches(const SearchRequest& request, const SearchProgress& progress,
                                     const std::atomic<bool>* stop) {
  Result<std::vector<bool>> given = search::dimensions_given(request.args);
  if (!given) return given.error();
  std::mutex files_lock;
  SearchRequest locked = request;
  locked.files = [&](const std::string& path) -> std::optional<std::string> {
    if (!request.files) return std::nullopt;
    const std::lock_guard<std::mutex> hold(files_lock);
    return request.files(path);
  };
  Result<JobSpec> base =
      job_from_megatron_args(request.args, request.world_size, request.hf, locked.files);
  if (!base) return Error{"the launch line as given: " + base.error().message};
  if (base->activations.seq_length <= 0) {
    return Error{"search needs --seq-length: the activations decide which launches fit"};
  }
  std::vector<search::EarlyRefusal> early;
  const std::vector<LaunchShape> shapes =
      search::launch_shapes(*base, request.space, *given, early);

  // Units of shapes that differ only in cp, which launch_shapes lists last.
  std::vector<std::size_t> unit_starts;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i == 0 || !same_but_cp(shapes[i - 1], shapes[i])) unit_starts.push_back(i);
  }
  unit_starts.push_back(shapes.size());
  const Searcher searcher(locked, *given, *base);
  const std::int64_t n = static_cast<std::int64_t>(unit_starts.size()) - 1;
  std::vector<ShapeOutcome> outcomes(static_cast<std::size_t>(n));
  const std::int64_t done = run_all(
      n, request.threads,
      [&](std::int64_t i) {
        const std::size_t u = static_cast<std::size_t>(i);
        outcomes[u] =
            searcher.evaluate(&shapes[unit_starts[u]], unit_starts[u + 1] - unit_starts[u]);
      },
      progress, stop);

  SearchResult result;
  result.interrupted = done < n;
  std::map<std::string, RejectedReason> reasons;
  const auto refuse = [&](const std::string& message) {
    RejectedReason& r = reasons[reason_of(message)];
    if (r.count++ == 0) r.example = message;
  };
  for (const search::EarlyRefusal& e : early) refuse(e.reason);
  for (ShapeOutcome& o : outcomes) {
    result.planned += o.planned;
    for (const std::string& message : o.refusals) refuse(message);
    for (SearchCandidate& c : o.candidates) result.candidates.push_back(std::move(c));
  }
  for (auto& [reason, r] : reasons) {
    r.reason = reason;
    result.rejected.push_back(std::move(r));
  }
  std::stable_sort(
      result.rejected.begin(), result.rejected.end(),
      [](const RejectedReason& a, const RejectedReason& b) { return a.count > b.count; });
  return result;
}

std::optional<RankBy> parse_rank_by(std::string_view name) {
  if (name == "time") return RankBy::time;
  if (name == "memory") return RankBy::memory;
  if (name == "traffic") return RankBy::traffic;
  if (name == "bubble") return RankBy::bubble;
  return std::nullopt;
}

bool fits(const SearchCandidate& candidate, std::int64_t gpu_bytes, std::int64_t headroom) {
  return candidate.heaviest.peak_bytes <= gpu_bytes - headroom;
}

void rank_candidates(std::vector<SearchCandidate>& candidates,
                     std::optional<std::int64_t> gpu_bytes, std::int64_t headroom, RankBy rank_by) {
  const auto key = [&](const SearchCandidate& c) {
    switch (rank_by) {
      case RankBy::memory:
        return static_cast<double>(c.heaviest.peak_bytes);
      case RankBy::traffic:
        return static_cast<double>(c.step.traffic.total());
      case RankBy::bubble:
        return c.step.bubble_fraction;
      case RankBy::time:
        break;
    }
    return c.step.step_seconds();
  };
  const auto model_ranks = [](const SearchCandidate& c) {
    return c.parallel.tp * c.parallel.pp * c.parallel.cp;
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const SearchCandidate& a, const SearchCandidate& b) {
                     if (gpu_bytes) {
                       const bool fa = fits(a, *gpu_bytes, headroom);
                       const bool fb = fits(b, *gpu_bytes, headroom);
                       if (fa != fb) return fa;
                     }
                     const double ka = key(a), kb = key(b);
                     if (ka != kb) return ka < kb;
                     return model_ranks(a) < model_ranks(b);
                   });
}

}  // namespace paramlayout
