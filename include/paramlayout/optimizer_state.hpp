// The optimizer state Megatron-LM allocates per param element a rank's
// optimizer owns: master weights (or their remainders), moments, and float32
// copies of 16-bit grads, by optimizer and precision options
// (megatron/core/optimizer/, Transformer Engine's FusedAdam).
#pragma once

#include <cstdint>
#include <string>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// The options that decide the optimizer's state.
struct OptimizerOptions {
  std::string name = "adam";           ///< --optimizer
  bool distributed = false;            ///< --use-distributed-optimizer (or dist_muon)
  bool precision_aware = false;        ///< --use-precision-aware-optimizer
  DType main_params = DType::float32;  ///< --main-params-dtype (fp32, fp16)
  /// --exp-avg-dtype, --exp-avg-sq-dtype: bytes per element (4 fp32, 2
  /// fp16/bf16, 1 fp8).
  int exp_avg_bytes = 4;
  int exp_avg_sq_bytes = 4;
  bool sgd_momentum = true;       ///< --sgd-momentum is not 0
  bool cpu_offload = false;       ///< --optimizer-cpu-offload
  double offload_fraction = 1.0;  ///< --optimizer-offload-fraction
  /// fp8/fp4 params with a recipe other than delayed: Megatron-LM keeps float32
  /// main params itself and TE's FusedAdam keeps only the moments
  /// (optimizer_config.py:407).
  bool quantized_params_not_delayed = false;
};

/// Bytes per owned element of one kind of state, and where they live.
struct OptimizerStateBytes {
  int master = 0;     ///< float32 main params, 16-bit remainders, or fp16 master weights
  int moments = 0;    ///< Adam's exp_avg + exp_avg_sq, Muon's momentum, SGD's momentum
  int grad_copy = 0;  ///< float32 copies of 16-bit grads the optimizer makes each step
  int total() const { return master + moments + grad_copy; }
};

/// What the optimizer allocates per element of a buffer it owns, on the GPU:
/// the buffer's params' dtype (`param_dtype`: uint8 for quantized storage,
/// whose params are nominally 16-bit), the grads' dtype, and whether the buffer
/// is Muon's (layerwise).
OptimizerStateBytes optimizer_state_bytes(const OptimizerOptions &options, DType param_dtype,
                                          DType grad_dtype, bool layerwise);

/// "fp32 main params + 2 fp32 moments: 12 bytes per element": for people.
std::string describe_optimizer_state(const OptimizerOptions &options, DType param_dtype,
                                     DType grad_dtype);

}  // namespace paramlayout
