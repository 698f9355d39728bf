// Megatron-LM's launch arguments into a JobSpec: the parallel and pipeline arguments here,
// the rest through each concept's reader; with the values
// validate_args and initialize_model_parallel derive from them.
#include "paramlayout/megatron_args.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

#include "activation_args.hpp"
#include "arg_map.hpp"
#include "buffer_args.hpp"
#include "model_args.hpp"
#include "optimizer_args.hpp"
#include "quantized_params.hpp"

namespace paramlayout {
namespace {

using job::ArgMap;

constexpr std::int64_t kMaxParallel = std::int64_t{1} << 20;

void read_parallel(ArgMap& a, JobSpec& job) {
  ParallelConfig& p = job.parallel;
  p.tp = a.integer("--tensor-model-parallel-size", 1, 1, kMaxParallel);
  p.pp = a.integer("--pipeline-model-parallel-size", 1, 1, kMaxParallel);
  p.cp = a.integer("--context-parallel-size", 1, 1, kMaxParallel);
  p.ep = a.integer("--expert-model-parallel-size", 1, 1, kMaxParallel);
  p.etp = a.integer("--expert-tensor-parallel-size", p.tp, 1, kMaxParallel);
  const std::pair<std::string_view, std::int64_t> kWeightShards[] = {
      {"--tensor-parallel-num-weight-shards", p.tp},
      {"--expert-tensor-parallel-num-weight-shards", p.etp}};
  for (const auto& [shards, tp] : kWeightShards) {
    if (std::optional<std::int64_t> n = a.maybe_integer(shards, 1, kMaxParallel); n && *n != tp) {
      a.fail(shards,
             "weight sharding beyond tensor parallelism (GTP) reshapes params, which "
             "paramlayout does not model");
    }
  }
  if (a.failed()) return;
  const std::int64_t model = p.tp * p.pp * p.cp;
  if (job.world_size % model != 0) {
    a.fail("--world-size", fmt::format("{} is not divisible by tp x pp x cp = {} x {} x {} = {}",
                                       job.world_size, p.tp, p.pp, p.cp, model));
    return;
  }
  job.dp = job.world_size / model;
  const std::int64_t expert_model = p.etp * p.ep * p.pp;
  if (job.world_size % expert_model != 0) {
    a.fail("--world-size", fmt::format("{} is not divisible by etp x ep x pp = {} x {} x {} = {} "
                                       "(the expert model-parallel size)",
                                       job.world_size, p.etp, p.ep, p.pp, expert_model));
    return;
  }
  job.expert_dp = job.world_size / expert_model;
  if (a.flag("--use-tp-pp-dp-mapping") && p.pp > 1 && job.expert_dp != job.dp) {
    a.fail("--use-tp-pp-dp-mapping", fmt::format("needs the same data-parallel size for the "
                                                 "dense ({}) and expert ({}) layers",
                                                 job.dp, job.expert_dp));
  }
}

/// vpp from --num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank
/// (a layout string sets it itself), and the checks validate_args makes.
void read_pipeline(ArgMap& a, JobSpec& job) {
  PipelineConfig& c = job.pipeline;
  c.pp = job.parallel.pp;
  c.num_layers = job.model.num_layers();
  c.mtp_num_layers = job.model.mtp_num_layers;
  c.mtp_given = a.has("--mtp-num-layers");
  c.first_stage_layers = a.maybe_integer("--decoder-first-pipeline-num-layers", 1, 1 << 30);
  c.last_stage_layers = a.maybe_integer("--decoder-last-pipeline-num-layers", 1, 1 << 30);
  c.account_for_embedding = a.flag("--account-for-embedding-in-pipeline-split");
  c.account_for_loss = a.flag("--account-for-loss-in-pipeline-split");
  const std::optional<std::string> layout = a.string("--pipeline-model-parallel-layout");
  if (layout && layout->empty()) {
    a.fail("--pipeline-model-parallel-layout",
           "expected a layout such as 'Et*3|(tt|)*29m|L', "
           "got an empty string");
  }
  c.layout = layout.value_or("");
  const std::optional<std::int64_t> per_stage =
      a.maybe_integer("--num-layers-per-virtual-pipeline-stage", 1, 1 << 30);
  const std::optional<std::int64_t> stages =
      a.maybe_integer("--num-virtual-stages-per-pipeline-rank", 1, 1 << 30);
  const bool overlap_p2p = !a.flag("--no-overlap-p2p-communication");
  if (a.failed()) return;
  if (int(per_stage.has_value()) + int(stages.has_value()) + int(!c.layout.empty()) > 1) {
    a.fail(c.layout.empty() ? "--num-virtual-stages-per-pipeline-rank"
                            : "--pipeline-model-parallel-layout",
           fmt::format("cannot be combined with {} (give the virtual stages one way)",
                       per_stage ? "--num-layers-per-virtual-pipeline-stage"
                                 : "--num-virtual-stages-per-pipeline-rank"));
    return;
  }
  if (!c.layout.empty() && (c.first_stage_layers || c.last_stage_layers ||
                            c.account_for_embedding || c.account_for_loss)) {
    a.fail("--pipeline-model-parallel-layout",
           "cannot be combined with the other pipeline "
           "split arguments");
    return;
  }
  if (job.model.hybrid &&
      (!c.layout.empty() || per_stage || stages || c.account_for_embedding || c.account_for_loss)) {
    a.fail("--hybrid-layer-pattern",
           "splits the pipeline itself ('|'); it cannot be combined "
           "with a layout, virtual stages or account-for arguments");
    return;
  }
  if (per_stage) {
    if (c.first_stage_layers || c.last_stage_layers) {
      a.fail("--num-layers-per-virtual-pipeline-stage",
             "use --num-virtual-stages-per-pipeline-rank with uneven first or last stages");
      return;
    }
    const std::int64_t counted = c.num_layers + c.account_for_embedding + c.account_for_loss;
    if (counted % c.pp != 0 || (counted / c.pp) % *per_stage != 0) {
      a.fail("--num-layers-per-virtual-pipeline-stage",
             fmt::format("{} does not divide the {} layers of each of the {} pipeline stages",
                         *per_stage, counted / c.pp, c.pp));
      return;
    }
    c.vpp = counted / c.pp / *per_stage;
  } else if (stages) {
    c.vpp = *stages;
  }
  if (!c.layout.empty()) {
    Result<std::vector<std::string>> layout = parse_pipeline_layout(c.layout);
    if (layout) c.vpp = static_cast<std::int64_t>(layout->size()) / c.pp;
  }
  if (c.vpp > 1 && c.pp < (overlap_p2p ? 2 : 3)) {
    a.fail("--pipeline-model-parallel-size",
           overlap_p2p ? "must be greater than 1 with virtual pipeline stages"
                       : "must be greater than 2 with virtual pipeline stages and "
                         "--no-overlap-p2p-communication");
    return;
  }
  job.parallel.vpp = std::max<std::int64_t>(c.vpp, 1);
  job.mtp_repeated_layer = a.flag("--mtp-use-repeated-layer");
}

/// --transformer-impl: transformer_engine (the default), or local for the GPT models
/// paramlayout builds with Megatron-Core's own modules; the rest are refused.
void read_transformer_impl(ArgMap& a, ModelSpec& m) {
  const std::string impl = a.string("--transformer-impl").value_or("transformer_engine");
  if (impl == "transformer_engine") return;
  if (impl != "local") {
    a.fail("--transformer-impl", fmt::format("'{}' builds modules paramlayout does not model "
                                             "(it models transformer_engine and local)",
                                             impl));
    return;
  }
  const std::pair<bool, std::string_view> kUnmodelled[] = {
      {m.hybrid || m.uses_mamba() || m.uses(Mixer::gated_delta_net),
       "hybrid, Mamba and linear-attention layers"},
      {m.mla.has_value(), "multi-latent attention"},
      {m.mtp_num_layers > 0, "multi-token prediction layers"},
      {m.softmax_offset, "learnable softmax offsets"},
      {m.post_linear_norms || m.uses(Mixer::linear) || m.uses(Mlp::linear),
       "this model's heterogeneous layers"},
      {m.moe.latent_size > 0 || m.moe.shared_expert_size > 0, "latent or shared experts"},
  };
  for (const auto& [used, what] : kUnmodelled) {
    if (used) {
      a.fail("--transformer-impl", fmt::format("local with {} is not modelled (paramlayout "
                                               "models local GPT layers: attention, dense and "
                                               "routed-expert MLPs)",
                                               what));
      return;
    }
  }
  if (a.has("--fp8-param-gather")) {
    a.fail("--fp8-param-gather",
           "needs Transformer Engine's modules, not --transformer-impl "
           "local");
    return;
  }
  m.local_spec = true;
}

/// Arguments that change the params or their layout in ways paramlayout does not model.
void reject_unmodelled(ArgMap& a) {
  // --spec MODULE NAME (nargs '*'): the hybrid and Mamba stack specs are the ones
  // pretrain_mamba.py and pretrain_hybrid.py build; any other spec is the user's own.
  if (std::optional<std::vector<std::string>> spec = a.values("--spec"); spec && !spec->empty()) {
    const std::vector<std::vector<std::string>> kModelled = {
        {"megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"},
        {"megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"}};
    if (std::find(kModelled.begin(), kModelled.end(), *spec) == kModelled.end()) {
      a.fail("--spec", fmt::format("'{}' is a custom layer spec, which paramlayout does not "
                                   "model (it models Megatron-LM's own GPT and hybrid specs)",
                                   fmt::join(*spec, " ")));
    }
  }
  const std::pair<std::string_view, std::string_view> kUnmodelled[] = {
      {"--use-torch-fsdp2",
       "PyTorch FSDP2 shards params itself, not in "
       "DistributedDataParallel's buffers"},
      {"--use-megatron-fsdp",
       "Megatron-FSDP lays out its own buffers, not "
       "DistributedDataParallel's"},
      {"--heterogeneous-layers-config-path", "give the model's config.json with --hf-config"},
      {"--yaml-cfg", "pass the arguments themselves"},
      {"--moe-latent-size", "MoE latent projections are not modelled"},
      {"--enable-mhc-connections", "hyper-connections are not modelled"},
      {"--freeze-all-layers", "leaves no trainable params"},
  };
  for (const auto& [name, why] : kUnmodelled) {
    if (a.has(name)) a.fail(name, why);
  }
  if (a.flag("--modelopt-enabled")) {
    a.fail("--modelopt-enabled",
           "builds the model with ModelOpt's builder "
           "(model_provider.py:55), which paramlayout does not model");
  }
  // transformer_config.py:1413-1414, 1707-1712, 1736-1741: TransformerConfig's refusals, then
  // one grouped weight (or bias) for all of a layer's experts, whose params are not modelled.
  const bool grouped_gemm = a.flag("--moe-grouped-gemm");
  if (a.flag("--moe-use-grouped-tensor") && !grouped_gemm) {
    a.fail("--moe-use-grouped-tensor",
           "requires --moe-grouped-gemm: Megatron-LM's "
           "TransformerConfig refuses it without "
           "(transformer_config.py:1413-1414)");
  }
  for (const std::string_view single :
       {"--moe-single-grouped-weight", "--moe-single-grouped-bias"}) {
    if (!a.flag(single)) continue;
    if (!grouped_gemm || !a.flag("--moe-use-grouped-tensor")) {
      a.fail(single,
             "requires --moe-grouped-gemm and --moe-use-grouped-tensor: Megatron-LM's "
             "TransformerConfig refuses it without (transformer_config.py:1707-1712, "
             "1736-1741)");
    } else {
      a.fail(single,
             "one grouped param for all of a layer's experts (Transformer Engine's "
             "GroupedLinear) is not modelled");
    }
  }
}

/// What Megatron-LM's own model code refuses of the model the line builds, beyond its
/// argument checks. `from_line`: the model comes from the line's arguments (with --hf-config
/// Megatron-Bridge's provider builds it, and decides the fusions itself).
void reject_what_megatron_builds_not(ArgMap& a, const JobSpec& job, bool from_line) {
  const ModelSpec& m = job.model;
  const bool experts = m.moe.num_experts > 0;
  if (experts && m.add_bias_linear && job.parallel.etp != 1) {
    // megatron/core/transformer/transformer_config.py:2612-2615
    a.fail("--expert-tensor-parallel-size",
           fmt::format("is {}: Megatron-LM builds biases on MoE experts only at expert tensor "
                       "parallel size 1 (transformer_config.py: \"Bias in Moe is only supported "
                       "when ETP==1\"); give --disable-bias-linear or "
                       "--expert-tensor-parallel-size 1",
                       job.parallel.etp));
  }
  if (!from_line) return;
  // Transformer Engine's grouped experts (TEGroupedMLP: --moe-grouped-gemm, and every hybrid
  // model's experts) with biases refuse bias-dropout fusion, which is on unless
  // --no-bias-dropout-fusion (megatron/core/transformer/moe/experts.py:205-207).
  const bool te_grouped = experts && !m.local_spec && (m.moe.grouped_gemm || m.hybrid);
  if (te_grouped && m.add_bias_linear && !a.flag("--no-bias-dropout-fusion")) {
    a.fail("--moe-grouped-gemm",
           "with biases on the experts needs --no-bias-dropout-fusion "
           "(or --disable-bias-linear): Megatron-LM's TEGroupedMLP refuses "
           "bias-dropout fusion with biases");
  }
  // hybrid_builders.py:22-25: a hybrid model is built from the stack spec --spec names.
  const std::optional<std::vector<std::string>> spec = a.values("--spec");
  if (m.hybrid && (!spec || spec->empty())) {
    a.fail("--hybrid-layer-pattern",
           "builds a hybrid model, which Megatron-LM builds from the "
           "layer spec --spec names: give --spec "
           "megatron.core.models.hybrid.hybrid_layer_specs "
           "hybrid_stack_spec (hybrid_builders.py refuses the line "
           "without it)");
  }
}

}  // namespace

Result<JobSpec> job_from_megatron_args(const std::vector<std::string>& args,
                                       std::int64_t world_size, const HfModel* hf,
                                       const FileReader& files) {
  Result<ArgMap> parsed = ArgMap::parse(args);
  if (!parsed) return parsed.error();
  ArgMap& a = *parsed;
  JobSpec job;
  job.world_size = world_size;
  reject_unmodelled(a);
  std::vector<std::int64_t> hybrid_stages;
  if (hf != nullptr) {
    job.model = hf->spec;
    job.notes = hf->notes;
    job::check_model_args_agree(a, job.model);
  } else {
    job.model = job::read_model_args(a, hybrid_stages, files, job.notes);
  }
  job::read_build_args(a, job.model, job.notes);
  read_transformer_impl(a, job.model);
  if (a.failed()) return a.error();
  read_parallel(a, job);
  if (!a.failed()) read_pipeline(a, job);
  if (!a.failed()) reject_what_megatron_builds_not(a, job, hf == nullptr);
  job.pipeline.hybrid_stage_layers = hybrid_stages;
  if (!a.failed()) job::read_optimizer_args(a, job);
  if (!a.failed()) job::read_quantized_params(a, job);
  if (!a.failed()) job::read_activation_args(a, job);
  if (!a.failed()) job::read_buffer_args(a, job, hf != nullptr);
  if (a.failed()) return a.error();
  // After every argument is read, as Megatron-LM validates its arguments before it builds.
  if (std::optional<std::string> problem = model_problem(job.model)) {
    return Error{"the model: " + *problem};
  }
  job.ignored_arguments = a.unread();
  if (const std::vector<std::string> modelopt = a.modelopt_arguments(); !modelopt.empty()) {
    job.notes.push_back(
        fmt::format("{} {} ModelOpt's (post_training/arguments.py): Megatron-LM's pretrain "
                    "scripts accept {} only with nvidia-modelopt installed",
                    fmt::join(modelopt, ", "), modelopt.size() == 1 ? "is" : "are",
                    modelopt.size() == 1 ? "it" : "them"));
  }
  return job;
}

}  // namespace paramlayout
