#include "buffer_args.hpp"
#include "model_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace paramlayout::job {
namespace {

RotaryKind rotary_kind(const std::string& type) {
  if (type == "rope") return RotaryKind::rope;
  if (type == "yarn") return RotaryKind::yarn;
  if (type == "mrope") return RotaryKind::mrope;
  return RotaryKind::none;
}

/// router.py:388-401 (get_aux_loss_coeff) and :203, :227: which of the routers' optional
/// buffers the load-balancing types and coefficients make.
void read_load_balancing(ArgMap& a, ModelBufferOptions& o) {
  const std::vector<std::string> types =
      a.values("--moe-router-load-balancing-type").value_or(std::vector<std::string>{"aux_loss"});
  const std::vector<std::string> coeffs =
      a.values("--moe-aux-loss-coeff").value_or(std::vector<std::string>{"0.0"});
  // validate_args (arguments.py:1661-1664) makes one-element lists single values.
  const auto it = std::find(types.begin(), types.end(), "global_aux_loss");
  const auto index = static_cast<std::size_t>(it - types.begin());
  if (it != types.end() && index < coeffs.size()) {
    o.router_global_aux_loss = std::strtod(coeffs[index].c_str(), nullptr) > 0;
  }
  o.router_quantile_balancing = types.size() == 1 && types.front() == "quantile_balancing";
}

}  // namespace

void read_buffer_args(ArgMap& a, JobSpec& job, bool hf) {
  ModelBufferOptions& o = job.buffers;
  std::string type = "rope";
  if (hf) {
    if (job.model.position_embedding != PositionEmbedding::rope) type = "none";
  } else {
    type = position_embedding_type(a);
  }
  o.rotary = rotary_kind(type);
  // A Hugging Face model's is its config's (Megatron-Bridge's partial_rotary_factor mapping).
  if (!hf) job.model.rotary_percent = a.maybe_real("--rotary-percent").value_or(1.0);
  // argument_utils.py:335-341: without --rope-type, MLATransformerConfig's yarn.
  if (const std::optional<std::string> rope = a.string("--rope-type")) {
    o.mla_rotary = rotary_kind(*rope);
  }
  // arguments.py:1628-1629: rope fusion only with rope positions; a Hugging Face model's
  // config (Megatron-Bridge's) keeps TransformerConfig's default, off.
  o.rope_fusion = !hf && !a.flag("--no-rope-fusion") && type == "rope";
  // argument_utils.py:408.
  o.yarn_original_max_positions =
      a.integer("--yarn-original-max-position-embeddings", 4096, 1, std::int64_t{1} << 30);
  if (a.flag("--moe-router-enable-expert-bias")) job.model.moe.router_expert_bias = true;
  // A Hugging Face model's balancing is its provider's; a launch line's, its arguments'.
  if (hf) {
    o.router_global_aux_loss = job.model.moe.router_global_aux_loss;
  } else {
    read_load_balancing(a, o);
  }
}

}  // namespace paramlayout::job
