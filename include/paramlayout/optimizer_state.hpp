// The optimizer state Megatron-LM allocates for the params a rank's optimizer
// owns: master weights (or their remainders), moments, preconditioners and
// float32 copies of 16-bit grads, by optimizer, by param (which optimizer
// Megatron-LM gives it) and precision options (megatron/core/optimizer/, the
// emerging_optimizers package, Transformer Engine's FusedAdam).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// The options that decide the optimizer's state.
struct OptimizerOptions {
  std::string name = "adam";           ///< --optimizer (dist_muon read as muon)
  bool distributed = false;            ///< --use-distributed-optimizer (or dist_muon)
  bool precision_aware = false;        ///< --use-precision-aware-optimizer
  DType main_params = DType::float32;  ///< --main-params-dtype (fp32, fp16)
  /// --exp-avg-dtype, --exp-avg-sq-dtype: bytes per element (4 fp32, 2
  /// fp16/bf16, 1 fp8).
  int exp_avg_bytes = 4;
  int exp_avg_sq_bytes = 4;
  bool sgd_momentum = true;               ///< --sgd-momentum is not 0
  std::string scalar_optimizer = "adam";  ///< --muon-scalar-optimizer (adam, lion)
  bool cpu_offload = false;               ///< --optimizer-cpu-offload
  double offload_fraction = 1.0;          ///< --optimizer-offload-fraction
  /// What orders the param groups HybridDeviceOptimizer offloads by
  /// (__init__.py:94-130):
  /// --decoupled-lr (embeddings and output layer in groups of their own) and
  /// --apply-wd-to-qk-layernorm (q/k layernorms stay in the default group).
  bool decoupled_lr = false;
  bool wd_on_qk_layernorm = false;
  /// fp8/fp4 params with a recipe other than delayed: Megatron-LM keeps float32
  /// main params itself and TE's FusedAdam keeps only the moments
  /// (optimizer_config.py:407).
  bool quantized_params_not_delayed = false;
};

/// The optimizer that updates one param.
enum class ParamOptimizer : std::uint8_t { adam, sgd, lion, muon, adaptive_muon, soap };
std::string_view to_string(ParamOptimizer optimizer);

/// One --optimizer choice of Megatron-LM (arguments.py's choices; emerging_optimizers.py's
/// registry for the emerging ones).
struct OptimizerKind {
  std::string_view name;      ///< as --optimizer spells it
  std::string_view reads_as;  ///< the optimizer it is (dist_muon is muon, arguments.py:1727)
  bool distributed;           ///< implies --use-distributed-optimizer (dist_muon)
  bool emerging;              ///< an emerging optimizer: the layer-wise layout, no --fp16
  bool muon;                  ///< Muon's family: --muon-scalar-optimizer for the rest
  ParamOptimizer matrices;    ///< what its 2-D params other than embeddings take
};

/// Every --optimizer choice, in Megatron-LM's order.
std::span<const OptimizerKind> optimizer_kinds();

/// The --optimizer choice named `name`, or nullptr.
const OptimizerKind *find_optimizer(std::string_view name);

/// Which optimizer Megatron-LM gives `param`: Adam or SGD as asked; under an
/// emerging optimizer, the emerging one for 2-D params other than embeddings
/// and the output layer (for Muon also not `use_muon == false`), and Adam for
/// the rest (--muon-scalar-optimizer under Muon).
ParamOptimizer param_optimizer(const OptimizerOptions &options, const Param &param);

/// The Megatron-LM optimizer that holds a buffer's main params: the distributed
/// optimizer (shards of a sequential-dp buffer), or
/// Float16OptimizerWithFloat16Params / FP32Optimizer around whole params
/// (without the distributed optimizer, or under the layer-wise one).
enum class StateHolder : std::uint8_t { distributed, whole_params };

/// Bytes per owned element of one kind of state.
struct OptimizerStateBytes {
  int master = 0;     ///< float32 main params, 16-bit remainders, or fp16 master weights
  int moments = 0;    ///< Adam's, Lion's, SOAP's exp_avg(_sq), Muon's momentum (+ moment2)
  int grad_copy = 0;  ///< float32 copies of 16-bit grads the optimizer makes each step
  int total() const { return master + moments + grad_copy; }
};

/// What `optimizer` allocates per owned element of a param held by `holder`, in
/// a buffer of `param_dtype` (uint8 for quantized storage, whose params are
/// nominally 16-bit) and `grad_dtype`; SOAP's per-matrix state comes on top
/// (matrix_state_bytes).
OptimizerStateBytes optimizer_state_bytes(const OptimizerOptions &options, ParamOptimizer optimizer,
                                          StateHolder holder, DType param_dtype, DType grad_dtype);

/// State an optimizer allocates per matrix rather than per element: SOAP's
/// Kronecker factors L, R and their eigenbases Q_L, Q_R, float32, rows^2 +
/// cols^2 each pair; 0 for the others. nullopt when it does not fit in 64 bits.
std::optional<std::int64_t> matrix_state_bytes(ParamOptimizer optimizer, const Param &param);

/// Bytes of optimizer state on the GPU for `elements` owned elements of `param`
/// (the whole param where `optimizer` is SOAP); nullopt when they do not fit in
/// 64 bits.
std::optional<std::int64_t> param_state_bytes(const OptimizerOptions &options, const Param &param,
                                              StateHolder holder, DType param_dtype,
                                              DType grad_dtype, std::int64_t elements);

/// What HybridDeviceOptimizer allocates on the GPU per element it keeps there
/// (--optimizer-offload-fraction < 1): a float32 copy of a 16-bit param, two
/// float32 moments of a FusedAdam built with its defaults, a float32 copy of a
/// 16-bit grad.
OptimizerStateBytes offload_kept_bytes(DType param_dtype, DType grad_dtype);

/// "fp32 main params + 2 fp32 moments: 12 bytes per element": for people.
std::string describe_optimizer_state(const OptimizerOptions &options, DType param_dtype,
                                     DType grad_dtype);

}  // namespace paramlayout
