#include "activation_args.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace paramlayout {

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

}  // namespace paramlayout

namespace paramlayout::job {
namespace {

void read_recompute(ArgMap& a, ActivationOptions& o) {
  const std::optional<std::string> granularity = a.string("--recompute-granularity");
  if (granularity == "full") o.recompute = Recompute::full;
  if (granularity == "selective") o.recompute = Recompute::selective;
  // arguments.py:607-608: --recompute-activations is selective recompute.
  if (a.flag("--recompute-activations")) o.recompute = Recompute::selective;
  const std::optional<std::string> method = a.string("--recompute-method");
  if (method && o.recompute == Recompute::selective) {
    // arguments.py:1425-1428
    a.fail("--recompute-method",
           "is not supported with selective recompute (Megatron-LM: "
           "\"recompute method is not yet supported for selective "
           "recomputing granularity\")");
    return;
  }
  if (method == "block") o.method = RecomputeMethod::block;
  o.recompute_num_layers = a.integer("--recompute-num-layers", 1, 0);
  if (const std::optional<std::vector<std::string>> modules = a.values("--recompute-modules")) {
    // transformer_config.py: the default is ["core_attn"].
    o.recompute_core_attention =
        std::find(modules->begin(), modules->end(), "core_attn") != modules->end();
    o.recompute_mlp = std::find(modules->begin(), modules->end(), "mlp") != modules->end();
  }
}

/// transformer_config.py:1836-1866: a negative capacity factor is dropless (None); a factor
/// works only with the aux-loss load balancings or none, and padding needs a factor.
void read_capacity(ArgMap& a, ActivationOptions& o) {
  std::optional<double> factor = a.maybe_real("--moe-expert-capacity-factor");
  if (factor && *factor < 0) factor.reset();
  o.moe_capacity_factor = factor.value_or(0);
  o.moe_pad_to_capacity = a.flag("--moe-pad-expert-input-to-capacity");
  if (factor) {
    const std::vector<std::string> types =
        a.values("--moe-router-load-balancing-type").value_or(std::vector<std::string>{});
    for (const std::string& type : types) {
      if (type != "aux_loss" && type != "seq_aux_loss" && type != "global_aux_loss" &&
          type != "none") {
        a.fail("--moe-expert-capacity-factor",
               fmt::format("works only with the aux_loss, seq_aux_loss, global_aux_loss or "
                           "none load balancing, not {} (transformer_config.py:1839-1859)",
                           type));
      }
    }
  }
  if (o.moe_pad_to_capacity && !factor) {
    a.fail("--moe-pad-expert-input-to-capacity",
           "needs --moe-expert-capacity-factor (transformer_config.py:1862-1866)");
  }
}

}  // namespace

void read_activation_args(ArgMap& a, JobSpec& job) {
  ActivationOptions& o = job.activations;
  o.micro_batch_size = a.integer("--micro-batch-size", 1, 1);
  o.seq_length = a.integer("--seq-length", 0, 1);
  // arguments.py:947-949: each context-parallel rank takes two chunks of the sequence.
  const std::int64_t cp = job.parallel.cp;
  if (o.seq_length > 0 && cp > 1 && o.seq_length % (2 * cp) != 0) {
    a.fail("--seq-length", fmt::format("{} is not a multiple of 2 x --context-parallel-size = {} "
                                       "(each context-parallel rank takes two chunks of it)",
                                       o.seq_length, 2 * cp));
  }
  // arguments.py:1435-1439: sequence parallelism is turned off at tensor parallel size 1.
  o.sequence_parallel = a.flag("--sequence-parallel") && job.parallel.tp > 1;
  // arguments.py:703: the global batch defaults to micro batch x data parallel size.
  const std::int64_t per_step = o.micro_batch_size * job.dp;
  o.global_batch_size = a.integer("--global-batch-size", per_step, 1);
  if (o.global_batch_size % per_step != 0) {
    job.notes.push_back(fmt::format(
        "--global-batch-size {} is not a multiple of micro batch x dp = {}: Megatron-LM's "
        "microbatch calculator refuses it at start-up (num_microbatches_calculator.py:382)",
        o.global_batch_size, per_step));
  }
  // arguments.py's default is 2; a Hugging Face config's num_experts_per_tok is the bridges'.
  const std::int64_t topk = job.model.moe.router_topk;
  o.moe_router_topk = a.integer("--moe-router-topk", topk > 0 ? topk : 2, 1);
  read_capacity(a, o);
  read_recompute(a, o);
}

}  // namespace paramlayout::job
