// The precision, optimizer and DDP arguments: which layout the optimizer implies, its state,
// and the buffers' bucketing (megatron/training/arguments.py, optimizer_config.py).
#include "optimizer_args.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

namespace paramlayout::job {
namespace {

constexpr std::int64_t kMaxParallel = std::int64_t{1} << 20;

/// Bytes per element of a --exp-avg-dtype / --exp-avg-sq-dtype choice.
int state_dtype_bytes(const std::string& name) {
  return name == "fp8" ? 1 : name == "fp32" ? 4 : 2;
}

/// The optimizer's state: --use-precision-aware-optimizer and its dtypes,
/// --optimizer-cpu-offload, SGD's momentum (optimizer_config.py:433-480, arguments.py).
void read_optimizer_state(ArgMap& a, JobSpec& job, const std::string& optimizer, bool distributed) {
  OptimizerOptions& o = job.optimizer;
  o.name = optimizer;
  o.distributed = distributed;
  o.precision_aware = a.flag("--use-precision-aware-optimizer");
  const std::string main_params = a.string("--main-params-dtype").value_or("fp32");
  const std::string exp_avg = a.string("--exp-avg-dtype").value_or("fp32");
  const std::string exp_avg_sq = a.string("--exp-avg-sq-dtype").value_or("fp32");
  o.main_params = main_params == "fp16" ? DType::float16 : DType::float32;
  o.exp_avg_bytes = state_dtype_bytes(exp_avg);
  o.exp_avg_sq_bytes = state_dtype_bytes(exp_avg_sq);
  if (std::optional<std::string> momentum = a.string("--sgd-momentum")) {
    o.sgd_momentum = std::strtod(momentum->c_str(), nullptr) != 0;
  }
  o.cpu_offload = a.flag("--optimizer-cpu-offload");
  if (o.precision_aware) {
    if (optimizer != "adam") {
      a.fail("--use-precision-aware-optimizer",
             "only supported with adam "
             "(optimizer_config.py:435)");
    } else if (!distributed) {
      a.fail("--use-precision-aware-optimizer",
             "only supported with the distributed optimizer "
             "(optimizer/__init__.py:1058)");
    }
  } else {
    const std::pair<std::string_view, const std::string*> kDtypes[] = {
        {"--main-params-dtype", &main_params},
        {"--exp-avg-dtype", &exp_avg},
        {"--exp-avg-sq-dtype", &exp_avg_sq}};
    for (const auto& [name, value] : kDtypes) {
      if (*value != "fp32") {
        a.fail(name,
               "can only be fp32 without --use-precision-aware-optimizer "
               "(optimizer_config.py:473-480)");
      }
    }
  }
  if (o.cpu_offload) {
    if (!o.precision_aware) {
      a.fail("--optimizer-cpu-offload",
             "must be used with --use-precision-aware-optimizer "
             "(arguments.py:1884)");
    }
    if (std::optional<std::string> f = a.string("--optimizer-offload-fraction")) {
      o.offload_fraction = std::strtod(f->c_str(), nullptr);
    }
    if (o.offload_fraction < 1) {
      // They decide the param groups, whose order decides what stays on the GPU.
      o.decoupled_lr = a.string("--decoupled-lr").has_value();
      o.wd_on_qk_layernorm = a.flag("--apply-wd-to-qk-layernorm");
    }
    if (o.offload_fraction < 1 && a.flag("--use-mup")) {
      a.fail("--optimizer-offload-fraction",
             "below 1 with --use-mup, whose param groups decide which params keep their state "
             "on the GPU and which paramlayout does not model");
    }
    if (o.offload_fraction >= 1) {
      job.notes.emplace_back(
          "the optimizer state lives in pinned host memory "
          "(--optimizer-cpu-offload): float32 params, grads and moments on "
          "the CPU; the figures count none of it on the GPU");
    }  // else the optimizer state's line says what stays on the GPU
  } else {
    a.has("--optimizer-offload-fraction");
  }
  const OptimizerKind* kind = find_optimizer(optimizer);
  if (kind->muon) o.scalar_optimizer = a.string("--muon-scalar-optimizer").value_or("adam");
  o.name = kind->reads_as;
}

}  // namespace

void read_optimizer_args(ArgMap& a, JobSpec& job) {
  const bool bf16 = a.flag("--bf16");
  const bool fp16 = a.flag("--fp16");
  if (bf16 && fp16) a.fail("--fp16", "cannot be combined with --bf16");
  job.param_dtype = bf16 ? DType::bfloat16 : fp16 ? DType::float16 : DType::float32;
  const std::string optimizer = a.string("--optimizer").value_or("adam");
  const OptimizerKind* kind = find_optimizer(optimizer);
  if (kind == nullptr) {
    std::vector<std::string_view> names;
    for (const OptimizerKind& k : optimizer_kinds()) names.push_back(k.name);
    a.fail("--optimizer",
           fmt::format("expected one of {}, got '{}'", fmt::join(names, ", "), optimizer));
    return;
  }
  const bool emerging = kind->emerging;
  if (emerging && fp16) a.fail("--optimizer", fmt::format("{} does not support --fp16", optimizer));
  const bool distributed = a.flag("--use-distributed-optimizer") || kind->distributed;
  const bool layerwise_layout = !a.flag("--no-use-layer-wise-param-layout");
  job.strategy = !distributed                   ? Strategy::unpadded
                 : emerging && layerwise_layout ? Strategy::layerwise
                 : emerging                     ? Strategy::unpadded
                                                : Strategy::sequential_dp;

  read_optimizer_state(a, job, optimizer, distributed);
  if (emerging && distributed && !layerwise_layout) {
    // They decide the param groups, whose order decides how params are dealt out.
    job.optimizer.decoupled_lr = a.string("--decoupled-lr").has_value();
    job.optimizer.wd_on_qk_layernorm = a.flag("--apply-wd-to-qk-layernorm");
    if (a.flag("--use-mup")) {
      a.fail("--no-use-layer-wise-param-layout",
             "with --use-mup, whose param groups decide how the layer-wise optimizer deals "
             "params out to the ranks and which paramlayout does not model");
    }
    job.notes.emplace_back(
        "without the layer-wise param layout, Megatron-LM's layer-wise optimizer deals whole "
        "params out to the data-parallel ranks by size (layer_wise_optimizer.py:713-760): "
        "the figures count its heaviest rank's optimizer state");
  }

  const bool accumulate_fp32 = a.flag("--accumulate-allreduce-grads-in-fp32");
  const bool reduce_bf16 = a.flag("--grad-reduce-in-bf16");
  const std::string main_grads = a.string("--main-grads-dtype").value_or("fp32");
  if (main_grads != "fp32" && main_grads != "bf16") {
    a.fail("--main-grads-dtype", fmt::format("expected fp32 or bf16, got '{}'", main_grads));
  } else if (main_grads == "bf16" && !job.optimizer.precision_aware) {
    a.fail("--main-grads-dtype",
           "can only be fp32 without --use-precision-aware-optimizer "
           "(optimizer_config.py:470)");
  } else if (accumulate_fp32 && main_grads == "bf16") {
    a.fail("--main-grads-dtype", "can only be fp32 with --accumulate-allreduce-grads-in-fp32");
  }
  job.grad_reduce_in_fp32 = bf16 ? !reduce_bf16 && main_grads == "fp32" : accumulate_fp32;
  if (bf16 && job.grad_reduce_in_fp32 && !accumulate_fp32) {
    job.notes.emplace_back(
        "grads are reduced in float32: --bf16 implies "
        "--accumulate-allreduce-grads-in-fp32 (--grad-reduce-in-bf16 "
        "reduces them in bfloat16)");
  }

  job.overlap_grad_reduce = a.flag("--overlap-grad-reduce");
  const bool overlap_param_gather = a.flag("--overlap-param-gather");
  job.overlap_param_gather_with_optimizer_step =
      a.flag("--overlap-param-gather-with-optimizer-step");
  if (overlap_param_gather && !(distributed && job.overlap_grad_reduce)) {
    a.fail("--overlap-param-gather",
           "needs --use-distributed-optimizer and "
           "--overlap-grad-reduce");
  }
  if (job.overlap_param_gather_with_optimizer_step &&
      (!overlap_param_gather || job.strategy != Strategy::sequential_dp)) {
    a.fail("--overlap-param-gather-with-optimizer-step",
           "needs --overlap-param-gather and the distributed optimizer (not Muon's layer-wise "
           "one)");
  }
  job.ddp_bucket_size = a.maybe_integer("--ddp-bucket-size", 1, std::int64_t{1} << 50);
  job.ddp_num_buckets = a.maybe_integer("--ddp-num-buckets", 1, std::int64_t{1} << 30);
  if (job.ddp_bucket_size && job.ddp_num_buckets) {
    a.fail("--ddp-num-buckets", "cannot be combined with --ddp-bucket-size");
  }
  job.pad_for_high_nccl_busbw = a.flag("--ddp-pad-buckets-for-high-nccl-busbw");
  a.flag("--ddp-average-in-collective");
  job.optimizer_instances = a.integer("--num-distributed-optimizer-instances", 1, 1, kMaxParallel);
  if (job.optimizer_instances > 1) {
    const std::int64_t dense = job.dp * job.parallel.cp;
    if (job.strategy == Strategy::layerwise) {
      a.fail("--num-distributed-optimizer-instances",
             "must be 1 with Muon's layer-wise "
             "optimizer");
    } else if (dense % job.optimizer_instances != 0 ||
               job.expert_dp % job.optimizer_instances != 0) {
      a.fail("--num-distributed-optimizer-instances",
             fmt::format("{} does not divide the data-parallel sizes (dense {}, expert {})",
                         job.optimizer_instances, dense, job.expert_dp));
    }
  }
  if (!job.overlap_grad_reduce) {
    job.notes.emplace_back(
        "one bucket per buffer: Megatron-LM buckets only with "
        "--overlap-grad-reduce");
  }
}

}  // namespace paramlayout::job
