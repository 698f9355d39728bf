// What decides a rank's activation memory: the launch's batch, sequence and recompute
// arguments (megatron/training/arguments.py).
#pragma once

#include <cstdint>
#include <string_view>

namespace paramlayout {

/// --recompute-granularity (--recompute-activations is selective).
enum class Recompute : std::uint8_t { none, selective, full };
std::string_view to_string(Recompute recompute);

/// --recompute-method under full recompute.
enum class RecomputeMethod : std::uint8_t { uniform, block };

/// The launch's arguments that decide what each rank holds for backward.
struct ActivationOptions {
  std::int64_t micro_batch_size = 1;   ///< --micro-batch-size
  std::int64_t seq_length = 0;         ///< --seq-length; 0: not given (no estimate)
  std::int64_t global_batch_size = 0;  ///< --global-batch-size; 0: micro batch x dp
  bool sequence_parallel = false;      ///< --sequence-parallel
  Recompute recompute = Recompute::none;
  RecomputeMethod method = RecomputeMethod::uniform;
  std::int64_t recompute_num_layers = 1;  ///< --recompute-num-layers
  /// --recompute-modules under selective recompute: only core_attn (the default) and mlp
  /// change the estimate.
  bool recompute_core_attention = true;
  bool recompute_mlp = false;
  std::int64_t moe_router_topk = 2;  ///< --moe-router-topk: experts each token is routed to
  /// --moe-expert-capacity-factor; 0: dropless (None, or negative, as Megatron-LM reads it).
  double moe_capacity_factor = 0;
  bool moe_pad_to_capacity = false;  ///< --moe-pad-expert-input-to-capacity

  bool operator==(const ActivationOptions&) const = default;
};

}  // namespace paramlayout
