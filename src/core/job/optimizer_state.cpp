// Upstream references are Megatron-LM d98e8a64, Transformer Engine 2.17.1
// (4329ff84) and emerging_optimizers 0.3.0, the versions Megatron-LM's
// pyproject.toml pins.
#include "paramlayout/optimizer_state.hpp"

#include <fmt/format.h>

namespace paramlayout {
namespace {

bool sixteen_bit(DType d) {
  return d == DType::bfloat16 || d == DType::float16 || d == DType::uint8;
}

/// uint8 buffers hold quantized params whose nominal dtype is bfloat16 (fp8/fp4 params need
/// --bf16: arguments.py validate_args).
DType nominal(DType d) { return d == DType::uint8 ? DType::bfloat16 : d; }

/// TE's FusedAdam takes the grads as they are (`decoupled_grad`) unless
/// Megatron-LM keeps the float32 main params itself
/// (optimizer_config.py:407-414).
bool te_reads_grads(const OptimizerOptions &o, DType param_dtype) {
  return o.precision_aware && !(o.quantized_params_not_delayed && o.main_params == DType::float32 &&
                                param_dtype == DType::uint8);
}

}  // namespace

std::span<const OptimizerKind> optimizer_kinds() {
  using P = ParamOptimizer;
  static constexpr OptimizerKind kKinds[] = {
      // name, reads as, distributed, emerging, muon, matrices
      {"adam", "adam", false, false, false, P::adam},
      {"sgd", "sgd", false, false, false, P::sgd},
      {"muon", "muon", false, true, true, P::muon},
      {"dist_muon", "muon", true, true, true, P::muon},
      {"lion", "lion", false, true, false, P::lion},
      {"soap", "soap", false, true, false, P::soap},
      {"adaptive_muon", "adaptive_muon", false, true, true, P::adaptive_muon},
  };
  return kKinds;
}

const OptimizerKind *find_optimizer(std::string_view name) {
  for (const OptimizerKind &k : optimizer_kinds()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::string_view to_string(ParamOptimizer optimizer) {
  switch (optimizer) {
    case ParamOptimizer::adam:
      return "Adam";
    case ParamOptimizer::sgd:
      return "SGD";
    case ParamOptimizer::lion:
      return "Lion";
    case ParamOptimizer::muon:
      return "Muon";
    case ParamOptimizer::adaptive_muon:
      return "adaptive Muon";
    case ParamOptimizer::soap:
      return "SOAP";
  }
  return "?";
}

ParamOptimizer param_optimizer(const OptimizerOptions &o, const Param &p) {
  const OptimizerKind *kind = find_optimizer(o.name);
  if (kind == nullptr || !kind->emerging) return kind ? kind->matrices : ParamOptimizer::adam;
  // emerging_optimizers.py:140-147 (_is_nonlinear_or_embedding,
  // _is_muon_excluded): the registry's default override sends embeddings, the
  // output layer and every param that is not 2-D to Adam (:93-100); Muon's also
  // those marked use_muon=False (:584-603), and Muon's fallback is
  // --muon-scalar-optimizer (__init__.py:805-814).
  const bool matrix = p.shape.size() == 2 && !p.embedding_or_output;
  if (kind->muon) {
    if (matrix && p.use_muon) return kind->matrices;
    return o.scalar_optimizer == "lion" ? ParamOptimizer::lion : ParamOptimizer::adam;
  }
  return matrix ? kind->matrices : ParamOptimizer::adam;
}

OptimizerStateBytes optimizer_state_bytes(const OptimizerOptions &o, ParamOptimizer optimizer,
                                          StateHolder holder, DType param_dtype, DType grad_dtype) {
  OptimizerStateBytes b;
  if (o.cpu_offload) {
    return b;  // HybridDeviceOptimizer: pinned host memory
               // (hybrid_optimizer.py:273)
  }
  const DType param = nominal(param_dtype);
  const bool half = sixteen_bit(param);
  const bool half_grads = half && grad_dtype != DType::float32;
  // Float32 main params for 16-bit params: the distributed optimizer's shards
  // (distrib_optimizer.py:421-450) or Float16OptimizerWithFloat16Params' copies
  // (optimizer.py:1012); float32 params are their own
  // (distrib_optimizer.py:466-469). Each step both copy 16-bit grads to float32
  // (distrib_optimizer.py:2792, optimizer.py:1097).
  b.master = half ? 4 : 0;
  b.grad_copy = half_grads ? 4 : 0;
  switch (optimizer) {
    case ParamOptimizer::sgd:
      b.moments = o.sgd_momentum ? 4 : 0;
      break;
    // The state tensors are zeros_like the float32 main params: Lion's exp_avg
    // (lion.py:107), Muon's momentum_buffer (orthogonalized_optimizer.py:145),
    // adaptive Muon's momentum_buffer and, with its default moment2_method
    // "adamuon" (optimizer_config.py:312, no launch argument sets it), a full
    // moment2_buffer (adaptive_muon.py:162-166); SOAP's float32 exp_avg and
    // exp_avg_sq (soap.py:151-152) and per-matrix factors.
    case ParamOptimizer::lion:
      b.moments = 4;
      break;
    case ParamOptimizer::muon:
      b.moments = 4;
      break;
    case ParamOptimizer::adaptive_muon:
      b.moments = 8;
      break;
    case ParamOptimizer::soap:
      b.moments = 8;
      break;
    case ParamOptimizer::adam:
      if (o.precision_aware && holder == StateHolder::distributed) {
        // __init__.py:564-588: TE's FusedAdam keeps the moments in their dtypes
        // and, unless Megatron-LM keeps float32 main params itself (quantized
        // params with a recipe other than delayed, optimizer_config.py:407), the
        // master weights: 16-bit remainders of float32 ones for bf16 params
        // (store_param_remainders, optimizer_config.py:192; fused_adam.py:213,
        // 414, 612), else main_params_dtype (fused_adam.py:417).
        b.moments = o.exp_avg_bytes + o.exp_avg_sq_bytes;
        if (!te_reads_grads(o, param_dtype)) {
          b.master = 4;  // distrib_optimizer.py:421-450
        } else {
          b.master = o.main_params == DType::float32 && param == DType::bfloat16
                         ? 2
                         : dtype_bytes(o.main_params);
          b.grad_copy = 0;  // decoupled_grad: the grad buffer's shard (:2790)
        }
      } else {
        b.moments = 8;  // exp_avg, exp_avg_sq (__init__.py:597-598)
      }
      break;
  }
  return b;
}

std::optional<std::int64_t> matrix_state_bytes(ParamOptimizer optimizer, const Param &param) {
  if (optimizer != ParamOptimizer::soap || param.shape.size() != 2) return 0;
  // soap.py:156-158: L (rows x rows) and R (cols x cols) from
  // init_kronecker_factors, Q_L and Q_R as torch.eye of the same sizes, all
  // float32.
  const std::int64_t rows = param.shape[0];
  const std::int64_t cols = param.shape[1];
  const std::optional<std::int64_t> r2 = checked_mul(rows, rows);
  const std::optional<std::int64_t> c2 = checked_mul(cols, cols);
  if (!r2 || !c2) return std::nullopt;
  const std::optional<std::int64_t> sum = checked_add(*r2, *c2);
  if (!sum) return std::nullopt;
  return checked_mul(*sum, 2 * 4);
}

std::optional<std::int64_t> param_state_bytes(const OptimizerOptions &o, const Param &param,
                                              StateHolder holder, DType param_dtype,
                                              DType grad_dtype, std::int64_t elements) {
  if (o.cpu_offload) return 0;
  const ParamOptimizer optimizer = param_optimizer(o, param);
  const std::optional<std::int64_t> per_element = checked_mul(
      elements, optimizer_state_bytes(o, optimizer, holder, param_dtype, grad_dtype).total());
  const std::optional<std::int64_t> matrix = matrix_state_bytes(optimizer, param);
  if (!per_element || !matrix) return std::nullopt;
  return checked_add(*per_element, *matrix);
}

OptimizerStateBytes offload_kept_bytes(DType param_dtype, DType grad_dtype) {
  // hybrid_optimizer.py:277-281: param_update_in_fp32 clones each 16-bit param to float32;
  // :93 its grad is cast to float32 each step; :212 the GPU optimizer (FusedAdam,
  // __init__.py:518-531) is built from the param groups alone, so its moments take their
  // default dtype, float32.
  OptimizerStateBytes b;
  const bool half = sixteen_bit(nominal(param_dtype));
  b.master = half ? 4 : 0;
  b.moments = 8;
  b.grad_copy = half && grad_dtype != DType::float32 ? 4 : 0;
  return b;
}

namespace {

std::string describe_per_element(const OptimizerOptions &o, ParamOptimizer optimizer,
                                 StateHolder holder, DType param_dtype, DType grad_dtype) {
  const OptimizerStateBytes b =
      optimizer_state_bytes(o, optimizer, holder, param_dtype, grad_dtype);
  const std::string master = b.master == 0 ? "no main params (the float32 params are)"
                             : b.master == 2 && o.main_params == DType::float32
                                 ? "16-bit remainders of float32 main params"
                             : b.master == 2 ? "float16 main params"
                                             : "float32 main params";
  std::string moments;
  switch (optimizer) {
    case ParamOptimizer::sgd:
      moments = b.moments ? "a float32 momentum" : "no momentum";
      break;
    case ParamOptimizer::lion:
      moments = "a float32 momentum";
      break;
    case ParamOptimizer::muon:
      moments = "a float32 momentum";
      break;
    case ParamOptimizer::adaptive_muon:
      moments = "a float32 momentum and second moment";
      break;
    case ParamOptimizer::soap:
      moments = "two float32 moments";
      break;
    case ParamOptimizer::adam:
      moments = o.precision_aware && holder == StateHolder::distributed
                    ? fmt::format("moments of {} + {} bytes", o.exp_avg_bytes, o.exp_avg_sq_bytes)
                    : "two float32 moments";
      break;
  }
  std::string out = fmt::format("{} + {}", master, moments);
  if (b.grad_copy) out += " + float32 copies of the grads";
  out += fmt::format(": {} bytes per element", b.total());
  if (optimizer == ParamOptimizer::soap) {
    out += " + float32 preconditioners of 2 x (rows^2 + cols^2) per matrix";
  }
  return out;
}

}  // namespace

std::string describe_optimizer_state(const OptimizerOptions &o, DType param_dtype,
                                     DType grad_dtype) {
  if (o.cpu_offload) {
    if (o.offload_fraction >= 1) {
      return "optimizer state in pinned host memory (--optimizer-cpu-offload): float32 params, "
             "grads and moments on the CPU, none on the GPU";
    }
    const OptimizerStateBytes kept = offload_kept_bytes(param_dtype, grad_dtype);
    const std::string on_gpu =
        fmt::format("{} bytes per element (float32 main params, two float32 moments{})",
                    kept.total(), kept.grad_copy ? ", float32 copies of the grads" : "");
    if (o.offload_fraction <= 0) {
      return fmt::format(
          "HybridDeviceOptimizer (--optimizer-offload-fraction {}) moves no param to the host: "
          "on the GPU {}",
          o.offload_fraction, on_gpu);
    }
    return fmt::format(
        "HybridDeviceOptimizer (--optimizer-offload-fraction {}): each rank's first {}% of its "
        "params, in the optimizer groups' order, keep float32 params, grads and moments in "
        "pinned host memory; the rest keep on the GPU {}",
        o.offload_fraction, o.offload_fraction * 100, on_gpu);
  }
  const StateHolder holder = o.distributed ? StateHolder::distributed : StateHolder::whole_params;
  const OptimizerKind *kind = find_optimizer(o.name);
  if (kind == nullptr || !kind->emerging) {
    const ParamOptimizer optimizer = kind ? kind->matrices : ParamOptimizer::adam;
    return describe_per_element(o, optimizer, holder, param_dtype, grad_dtype);
  }
  Param matrix;
  matrix.shape = {2, 2};
  Param vector;
  vector.shape = {2};
  const ParamOptimizer main = param_optimizer(o, matrix);
  const ParamOptimizer scalar = param_optimizer(o, vector);
  const std::string_view excluded =
      kind->muon ? "embeddings, output layer, params not 2-D or marked use_muon=False"
                 : "embeddings, output layer, params not 2-D";
  return fmt::format(
      "{} for matrices: {}; {} for the rest ({}): {}", to_string(main),
      describe_per_element(o, main, StateHolder::whole_params, param_dtype, grad_dtype),
      to_string(scalar), excluded,
      describe_per_element(o, scalar, holder, param_dtype, grad_dtype));
}

}  // namespace paramlayout
