// Upstream references are Megatron-LM d98e8a64 and Transformer Engine 2.17.1
// (4329ff84, the version Megatron-LM's pyproject.toml pins).
#include "paramlayout/optimizer_state.hpp"

#include <fmt/format.h>

namespace paramlayout {
namespace {

bool sixteen_bit(DType d) {
  return d == DType::bfloat16 || d == DType::float16 || d == DType::uint8;
}

/// uint8 buffers hold quantized params whose nominal dtype is bfloat16 (fp8/fp4
/// params need
/// --bf16: arguments.py validate_args).
DType nominal(DType d) { return d == DType::uint8 ? DType::bfloat16 : d; }

}  // namespace

OptimizerStateBytes optimizer_state_bytes(const OptimizerOptions &o, DType param_dtype,
                                          DType grad_dtype, bool layerwise) {
  OptimizerStateBytes b;
  if (o.cpu_offload)
    return b;  // HybridDeviceOptimizer: pinned host memory
               // (hybrid_optimizer.py:273)
  const DType param = nominal(param_dtype);
  const bool half = sixteen_bit(param);
  if (layerwise) {
    // Muon's layer-wise optimizer: float32 main params for 16-bit params
    // (distrib/float16 optimizer path) and one momentum buffer.
    b.master = half ? 4 : 0;
    b.moments = 4;
    return b;
  }
  if (o.name == "sgd") {
    b.master = half ? 4 : 0;
    b.moments = o.sgd_momentum ? 4 : 0;
  } else if (o.precision_aware) {
    // __init__.py:564-588: TE's FusedAdam keeps the moments in their dtypes
    // and, unless Megatron-LM keeps float32 main params itself (quantized
    // params with a recipe other than delayed, optimizer_config.py:407), the
    // master weights: 16-bit remainders of float32 ones for bf16 params
    // (store_param_remainders, optimizer_config.py:192; fused_adam.py:213, 414,
    // 612), else main_params_dtype (fused_adam.py:417).
    b.moments = o.exp_avg_bytes + o.exp_avg_sq_bytes;
    if (o.quantized_params_not_delayed && o.main_params == DType::float32 &&
        param_dtype == DType::uint8) {
      b.master = 4;  // distrib_optimizer.py:421-450
    } else if (o.main_params == DType::float32 && param == DType::bfloat16) {
      b.master = 2;
    } else {
      b.master = dtype_bytes(o.main_params);
    }
  } else {
    // Adam (and the emerging optimizers' Adam-based params): float32 main
    // params for 16-bit params (distrib_optimizer.py:421-450,
    // optimizer.py:1012), the float32 params themselves otherwise
    // (distrib_optimizer.py:466-469), and two float32 moments
    // (__init__.py:597-598).
    b.master = half ? 4 : 0;
    b.moments = 8;
  }
  // Without the distributed optimizer, Float16OptimizerWithFloat16Params copies
  // each 16-bit grad to float32 before the step (optimizer.py:1097,
  // main_grad.float()).
  if (!o.distributed && half && grad_dtype != DType::float32) b.grad_copy = 4;
  return b;
}

std::string describe_optimizer_state(const OptimizerOptions &o, DType param_dtype,
                                     DType grad_dtype) {
  if (o.cpu_offload) {
    return "optimizer state in pinned host memory (--optimizer-cpu-offload): "
           "float32 params, "
           "grads and moments on the CPU, none on the GPU";
  }
  const OptimizerStateBytes b = optimizer_state_bytes(o, param_dtype, grad_dtype, false);
  std::string master = b.master == 0 ? std::string("no main params (the float32 params are)")
                       : b.master == 2 && o.main_params == DType::float32
                           ? std::string("16-bit remainders of float32 main params")
                       : b.master == 2 ? std::string("float16 main params")
                                       : std::string("float32 main params");
  std::string moments = o.name == "sgd"     ? (b.moments ? "a float32 momentum" : "no momentum")
                        : o.precision_aware ? fmt::format("moments of {} + {} bytes",
                                                          o.exp_avg_bytes, o.exp_avg_sq_bytes)
                                            : std::string("two float32 moments");
  std::string out = fmt::format("{} + {}", master, moments);
  if (b.grad_copy) out += " + float32 copies of the grads";
  return fmt::format("{}: {} bytes per element", out, b.total());
}

}  // namespace paramlayout
