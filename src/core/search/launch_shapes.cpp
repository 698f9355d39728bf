#include "launch_shapes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <string_view>

#include "job/arg_map.hpp"
#include "layout_strings.hpp"
#include "paramlayout/pipeline.hpp"

namespace paramlayout::search {
namespace {

using D = SearchDimension;

/// The arguments that set each dimension (a layout string sets vpp and the split).
constexpr std::array<std::pair<D, std::string_view>, 17> kSetBy{{
    {D::tp, "--tensor-model-parallel-size"},
    {D::pp, "--pipeline-model-parallel-size"},
    {D::vpp, "--num-virtual-stages-per-pipeline-rank"},
    {D::vpp, "--num-layers-per-virtual-pipeline-stage"},
    {D::vpp, "--pipeline-model-parallel-layout"},
    {D::split, "--pipeline-model-parallel-layout"},
    {D::split, "--decoder-first-pipeline-num-layers"},
    {D::split, "--decoder-last-pipeline-num-layers"},
    {D::split, "--account-for-embedding-in-pipeline-split"},
    {D::split, "--account-for-loss-in-pipeline-split"},
    {D::cp, "--context-parallel-size"},
    {D::ep, "--expert-model-parallel-size"},
    {D::etp, "--expert-tensor-parallel-size"},
    {D::sequence_parallel, "--sequence-parallel"},
    {D::recompute, "--recompute-granularity"},
    {D::distributed_optimizer, "--use-distributed-optimizer"},
    {D::optimizer_instances, "--num-distributed-optimizer-instances"},
}};

bool varies(const SearchSpace& space, const std::vector<bool>& given, D d) {
  return space.varies(d) && !given[static_cast<std::size_t>(d)];
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

/// `sizes` up to `limit` (0: all).
std::vector<std::int64_t> within(std::vector<std::int64_t> sizes, std::int64_t limit) {
  if (limit > 0) std::erase_if(sizes, [&](std::int64_t s) { return s > limit; });
  return sizes;
}

/// The values to try for one size: the line's own when it is not varied, the user's list,
/// or every divisor of the world.
std::vector<std::int64_t> values(const SearchSpace& space, const std::vector<bool>& given, D d,
                                 const std::vector<std::int64_t>& listed, std::int64_t fixed,
                                 std::int64_t world) {
  if (!varies(space, given, d)) return {fixed};
  return listed.empty() ? divisors(world) : listed;
}

/// The splits of `layers` over `pp` stages to try: even, counting the embedding and the loss
/// as layers, and stages of `mid` layers between a first and a last stage that take the rest.
std::vector<PipelineSplit> splits(std::int64_t layers, std::int64_t pp, bool vary) {
  std::vector<PipelineSplit> out{PipelineSplit{}};
  if (!vary || pp == 1) return out;
  const auto add = [&](PipelineSplit s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  add({std::nullopt, std::nullopt, true, ""});
  for (std::int64_t mid : {layers / pp, (layers + pp - 1) / pp}) {
    if (mid < 1) continue;
    const std::int64_t rest = layers - mid * (pp - 1);
    if (rest >= 1 && rest != mid) {
      add({rest, std::nullopt, false, ""});
      add({std::nullopt, rest, false, ""});
    }
    const std::int64_t ends = layers - mid * (pp - 2);
    if (pp >= 3 && ends >= 2 && ends != 2 * mid) {
      add({ends / 2, ends - ends / 2, false, ""});
      add({ends - ends / 2, ends / 2, false, ""});
    }
  }
  return out;
}

/// Virtual stages per rank that `split` can take: v divides every stage's layers.
std::vector<std::int64_t> virtual_stages(std::int64_t layers, std::int64_t pp,
                                         const PipelineSplit& split,
                                         const std::vector<std::int64_t>& listed) {
  if (pp == 1) return {1};
  std::int64_t g = 0;
  if (split.first_stage_layers || split.last_stage_layers) {
    const std::int64_t f = split.first_stage_layers.value_or(0);
    const std::int64_t l = split.last_stage_layers.value_or(0);
    const std::int64_t others = pp - (f > 0) - (l > 0);
    const std::int64_t rest = layers - f - l;
    if (others <= 0 || rest % others != 0) return {1};
    g = std::gcd(std::gcd(f, l), rest / others);
  } else {
    const std::int64_t counted = layers + (split.account_for_embedding_and_loss ? 2 : 0);
    if (counted % pp != 0) return {1};
    g = counted / pp;
  }
  std::vector<std::int64_t> out;
  for (std::int64_t v : divisors(g)) {
    if (listed.empty() || std::find(listed.begin(), listed.end(), v) != listed.end()) {
      out.push_back(v);
    }
  }
  if (out.empty()) out.push_back(1);
  return out;
}

/// A split with the count of virtual stages per rank it is tried with.
struct PipelineChoice {
  PipelineSplit split;
  std::int64_t vpp = 1;
};

/// The placement of `split` at `vpp`, or nullopt where Megatron-LM refuses it.
std::optional<std::vector<ChunkPlacement>> placement(const JobSpec& base, std::int64_t pp,
                                                     const PipelineChoice& choice) {
  PipelineConfig c = base.pipeline;
  c.pp = pp;
  c.vpp = choice.vpp;
  c.first_stage_layers = choice.split.first_stage_layers;
  c.last_stage_layers = choice.split.last_stage_layers;
  c.account_for_embedding = c.account_for_loss = choice.split.account_for_embedding_and_loss;
  c.layout = choice.split.layout;
  Result<std::vector<ChunkPlacement>> placed = place_layers(c);
  if (!placed) return std::nullopt;
  return std::move(*placed);
}

/// Every (split, vpp) to try on `pp` stages: the splits by argument with each count of
/// virtual stages they allow, then, for models whose ends weigh decoder layers (or that have
/// multi-token prediction layers), a balanced layout string per count of virtual stages
/// tried so far, with no more virtual stages than decoder layers, where it leaves no middle
/// stage empty and places the layers differently from all of those.
std::vector<PipelineChoice> pipeline_choices(const JobSpec& base, const SearchSpace& space,
                                             const std::vector<bool>& given, std::int64_t pp,
                                             const EndWeights& weights) {
  const std::int64_t layers = base.model.num_layers();
  const bool vary_split = varies(space, given, D::split);
  const bool vary_vpp = varies(space, given, D::vpp);
  std::vector<PipelineChoice> out;
  for (const PipelineSplit& split : splits(layers, pp, vary_split)) {
    std::vector<std::int64_t> vpps{base.parallel.vpp};
    if (vary_vpp) vpps = virtual_stages(layers, pp, split, space.vpp);
    for (std::int64_t vpp : vpps) out.push_back({split, vpp});
  }
  // A line that sets the virtual stages (or a layout) keeps them: a layout sets its own.
  if (!vary_split || pp == 1 || given[static_cast<std::size_t>(D::vpp)] ||
      !wants_layout_strings(base.model, weights)) {
    return out;
  }
  std::vector<std::int64_t> vpps;
  for (const PipelineChoice& c : out) {
    if (pp * c.vpp <= layers && std::find(vpps.begin(), vpps.end(), c.vpp) == vpps.end()) {
      vpps.push_back(c.vpp);
    }
  }
  std::sort(vpps.begin(), vpps.end());
  const std::size_t by_argument = out.size();
  for (std::int64_t vpp : vpps) {
    const std::vector<std::string> stages =
        balanced_layout(layers, base.model.mtp_num_layers, pp * vpp, weights);
    // A middle stage left without layers would only pass activations on.
    if (std::any_of(stages.begin() + 1, stages.end() - 1,
                    [](const std::string& s) { return s.empty(); })) {
      continue;
    }
    PipelineChoice layout{{}, vpp};
    layout.split.layout = format_pipeline_layout(stages);
    const std::optional<std::vector<ChunkPlacement>> placed = placement(base, pp, layout);
    if (!placed) continue;
    const bool placed_before = std::any_of(
        out.begin(), out.begin() + static_cast<std::ptrdiff_t>(by_argument),
        [&](const PipelineChoice& c) { return c.vpp == vpp && placement(base, pp, c) == placed; });
    if (!placed_before) out.push_back(std::move(layout));
  }
  return out;
}

/// Distributed optimizer instances to try: every count that divides both the dense shards
/// (dp x cp) and the expert ones (megatron_args: Megatron-LM's check), with the distributed
/// optimizer only.
std::vector<std::int64_t> optimizer_instances(const JobSpec& base, const SearchSpace& space,
                                              const std::vector<bool>& given, bool distributed,
                                              std::int64_t dense_shards,
                                              std::int64_t expert_shards) {
  if (!distributed) return {1};
  if (!varies(space, given, D::optimizer_instances)) return {base.optimizer_instances};
  if (base.strategy == Strategy::layerwise) return {1};
  return divisors(std::gcd(dense_shards, expert_shards));
}

}  // namespace

std::vector<LaunchShape> launch_shapes(const JobSpec& base, const SearchSpace& space,
                                       const std::vector<bool>& given,
                                       std::vector<EarlyRefusal>& refused) {
  const ParallelConfig& p = base.parallel;
  const std::int64_t world = base.world_size;
  const bool experts = base.model.moe.num_experts > 0;
  const std::int64_t seq = base.activations.seq_length;
  // A size combination is met once per value of the dimensions inside its loop: refused once.
  std::set<std::string> seen;
  const auto refuse = [&](std::string reason) {
    if (seen.insert(reason).second) refused.push_back({std::move(reason)});
  };
  std::vector<LaunchShape> out;
  std::vector<bool> dist{base.strategy != Strategy::unpadded};
  if (varies(space, given, D::distributed_optimizer)) dist = {true, false};
  const std::vector<std::int64_t> cps = values(space, given, D::cp, space.cp, p.cp, world);
  const EndWeights weights = end_weights(base.model);
  for (std::int64_t tp : within(values(space, given, D::tp, space.tp, p.tp, world),
                                space.tp.empty() ? space.max_tensor_parallel : 0)) {
    for (std::int64_t pp : values(space, given, D::pp, space.pp, p.pp, world)) {
      if (space.max_pp > 0 && pp > space.max_pp) continue;
      const std::vector<PipelineChoice> pipelines =
          pipeline_choices(base, space, given, pp, weights);
      const std::vector<std::int64_t> eps =
          experts ? values(space, given, D::ep, space.ep, p.ep, world) : std::vector{p.ep};
      // Megatron-LM's default expert tensor parallel size is tp's.
      const bool etp_varies = experts && varies(space, given, D::etp);
      const std::vector<std::int64_t> etps =
          etp_varies ? within(space.etp.empty() ? divisors(world) : space.etp,
                              space.etp.empty() ? space.max_tensor_parallel : 0)
                     : std::vector{given[static_cast<std::size_t>(D::etp)] ? p.etp : tp};
      for (std::int64_t ep : eps) {
        for (std::int64_t etp : etps) {
          // parallel_state.py, initialize_model_parallel: the expert layers' world is
          // etp x ep x pp x expert dp (a dense model's is tp x pp x cp x dp's, below).
          if (experts && world % (etp * ep * pp) != 0) {
            refuse(fmt::format("the world ({}) is not divisible by etp x ep x pp = {} x {} x {}",
                               world, etp, ep, pp));
            continue;
          }
          for (const auto& [split, vpp] : pipelines) {
            for (bool d : dist) {
              for (std::int64_t instances : optimizer_instances(
                       base, space, given, d, world / (tp * pp), world / (etp * ep * pp))) {
                // Context parallel sizes last: they share one plan (the buffers are sharded
                // over dp x cp = world / (tp x pp) whatever cp is).
                for (std::int64_t cp : cps) {
                  // parallel_state.py, initialize_model_parallel: the world is tp x pp x cp x dp.
                  if (world % (tp * pp * cp) != 0) {
                    refuse(
                        fmt::format("the world ({}) is not divisible by tp x pp x cp = "
                                    "{} x {} x {}",
                                    world, tp, pp, cp));
                    continue;
                  }
                  // arguments.py:1335-1337
                  if (cp > 1 && seq % (2 * cp) != 0) {
                    refuse(
                        fmt::format("--seq-length {} is not a multiple of 2 x "
                                    "--context-parallel-size {} (arguments.py:1336)",
                                    seq, cp));
                    continue;
                  }
                  out.push_back({tp, pp, vpp, cp, ep, etp, split, d, instances});
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<ActivationChoice> activation_choices(const JobSpec& base, const SearchSpace& space,
                                                 const std::vector<bool>& given,
                                                 const LaunchShape& shape) {
  std::vector<bool> sps{base.activations.sequence_parallel};
  if (varies(space, given, D::sequence_parallel)) {
    sps = shape.tp > 1 ? std::vector{true, false} : std::vector{false};
  }
  std::vector<Recompute> recomputes{base.activations.recompute};
  if (varies(space, given, D::recompute)) {
    recomputes = {Recompute::none, Recompute::selective, Recompute::full};
  }
  std::vector<ActivationChoice> out;
  for (bool sp : sps) {
    for (Recompute r : recomputes) out.push_back({sp, r});
  }
  return out;
}

std::vector<std::string> added_arguments(const LaunchShape& shape, const ActivationChoice& choice,
                                         const SearchSpace& space, const std::vector<bool>& given) {
  std::vector<std::string> out;
  const auto size = [&](D d, std::string_view name, std::int64_t value, std::int64_t fallback) {
    if (varies(space, given, d) && value != fallback) {
      out.emplace_back(name);
      out.push_back(std::to_string(value));
    }
  };
  size(D::tp, "--tensor-model-parallel-size", shape.tp, 1);
  size(D::pp, "--pipeline-model-parallel-size", shape.pp, 1);
  if (shape.split.layout.empty()) {
    size(D::vpp, "--num-virtual-stages-per-pipeline-rank", shape.vpp, 1);
  }
  if (varies(space, given, D::split)) {
    if (!shape.split.layout.empty()) {
      out.insert(out.end(), {"--pipeline-model-parallel-layout", shape.split.layout});
    }
    if (shape.split.first_stage_layers) {
      out.insert(out.end(), {"--decoder-first-pipeline-num-layers",
                             std::to_string(*shape.split.first_stage_layers)});
    }
    if (shape.split.last_stage_layers) {
      out.insert(out.end(), {"--decoder-last-pipeline-num-layers",
                             std::to_string(*shape.split.last_stage_layers)});
    }
    if (shape.split.account_for_embedding_and_loss) {
      out.insert(out.end(), {"--account-for-embedding-in-pipeline-split",
                             "--account-for-loss-in-pipeline-split"});
    }
  }
  size(D::cp, "--context-parallel-size", shape.cp, 1);
  size(D::ep, "--expert-model-parallel-size", shape.ep, 1);
  size(D::etp, "--expert-tensor-parallel-size", shape.etp, shape.tp);
  if (varies(space, given, D::distributed_optimizer) && shape.distributed_optimizer) {
    out.emplace_back("--use-distributed-optimizer");
  }
  size(D::optimizer_instances, "--num-distributed-optimizer-instances", shape.optimizer_instances,
       1);
  if (varies(space, given, D::sequence_parallel) && choice.sequence_parallel) {
    out.emplace_back("--sequence-parallel");
  }
  if (varies(space, given, D::recompute)) {
    if (choice.recompute == Recompute::selective) {
      out.insert(out.end(), {"--recompute-granularity", "selective"});
    } else if (choice.recompute == Recompute::full) {
      out.insert(out.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform",
                             "--recompute-num-layers", "1"});
    }
  }
  return out;
}

Result<std::vector<bool>> dimensions_given(const std::vector<std::string>& args) {
  Result<job::ArgMap> parsed = job::ArgMap::parse(args);
  if (!parsed) return parsed.error();
  std::vector<bool> given(kSearchDimensions, false);
  for (const auto& [d, name] : kSetBy) {
    if (parsed->has(name)) given[static_cast<std::size_t>(d)] = true;
  }
  if (parsed->has("--recompute-activations")) {
    given[static_cast<std::size_t>(D::recompute)] = true;
  }
  return given;
}

}  // namespace paramlayout::search
