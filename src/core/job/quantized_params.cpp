// Upstream references: Megatron-LM d98e8a64 and Transformer Engine 2.17.1 (4329ff84).
#include "quantized_params.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace paramlayout {
namespace {

/// The modules Megatron-LM's Transformer Engine spec builds as TE linears (Linear,
/// LayerNormLinear, GroupedLinear): their weights carry an fp8_meta_index and become
/// quantized tensors under fp8_model_init (TE module/base.py:1721-1741, linear.py:1678,
/// layernorm_linear.py:1502); biases and layer-norm weights do not.
constexpr std::array<std::string_view, 12> kTeLinears = {"linear_qkv",        "linear_proj",
                                                         "linear_fc1",        "linear_fc2",
                                                         "linear_q_proj",     "linear_q_down_proj",
                                                         "linear_q_up_proj",  "linear_kv_down_proj",
                                                         "linear_kv_up_proj", "in_proj",
                                                         "out_proj",          "eh_proj"};

/// Whether `name` is the weight (or a grouped GEMM's weightN) of a TE linear module.
bool te_linear_weight(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view leaf = name.substr(dot + 1);
  if (leaf.substr(0, 6) != "weight" ||
      leaf.substr(6).find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  const std::string_view path = name.substr(0, dot);
  const std::string_view module = path.substr(path.rfind('.') + 1);
  for (std::string_view linear : kTeLinears) {
    if (module == linear) return true;
  }
  return false;
}

/// The global decoder layer a "decoder.layers.N." param belongs to; -1 for a
/// multi-token prediction layer's (built under fp8_model_init whatever its index:
/// multi_token_prediction.py:1927); nullopt outside the layers (embedding, output layer,
/// final norm: never under fp8_model_init; the output layer's TELMHeadColumnParallelLinear
/// of --fp8-output-proj is built outside it too, gpt_model.py:272-294).
std::optional<std::int64_t> layer_of(std::string_view name, const ChunkPlacement& placement) {
  if (name.substr(0, 11) == "mtp.layers.") return -1;
  constexpr std::string_view kDecoder = "decoder.layers.";
  if (name.substr(0, kDecoder.size()) != kDecoder) return std::nullopt;
  std::size_t i = kDecoder.size();
  std::size_t local = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9')
    local = local * 10 + (name[i++] - '0');
  if (local >= placement.layers.size()) return std::nullopt;
  return placement.layers[local];
}

}  // namespace

void mark_quantized_params(ModelChunk& chunk, const ChunkPlacement& placement,
                           const QuantizedParams& q, std::int64_t num_layers) {
  if (q.storage == Storage::dense) return;
  for (ChunkParam& p : chunk.params) {
    if (!te_linear_weight(p.name)) continue;
    const std::optional<std::int64_t> layer = layer_of(p.name, placement);
    if (!layer || (*layer < 0 && !q.mtp_layers)) continue;
    // fp8_utils.py:711-727 (is_first_last_bf16_layer) and fp4_utils.py:248-263
    // (get_fp4_context), on the global layer index.
    const bool bf16 =
        *layer >= 0 && (*layer < q.bf16_first_layers || *layer >= num_layers - q.bf16_last_layers);
    if (!bf16) p.storage = q.storage;
  }
}

namespace job {
namespace {

/// --fp4-param-gather: NVFP4 params (what --fp4-format and --fp4-recipe allow).
void read_fp4_params(ArgMap& a, JobSpec& job, bool first_last_bf16, std::int64_t start,
                     std::int64_t end) {
  const bool fp4 = a.string("--fp4-format").has_value();
  const std::string recipe = a.string("--fp4-recipe").value_or("nvfp4");
  if (a.failed()) return;
  if (!fp4) {
    a.fail("--fp4-param-gather", "must be used together with --fp4-format (arguments.py:1105)");
    return;
  }
  if (recipe == "custom") {
    a.fail("--fp4-recipe",
           "a custom recipe's quantizers are the user's own: their storage "
           "cannot be known ahead of time");
    return;
  }
  // fp4_utils.py:257-287: the decoder layers are built under fp8_model_init with the
  // NVFP4BlockScaling recipe (transformer_block.py:357-360, hybrid_block.py:129-130), so
  // TE's linears' weights become NVFP4Tensors (module/base.py:1721-1741); the layers kept
  // bf16 by --first-last-layers-bf16 are not (fp4_utils.py:262, no range check for fp4:
  // transformer_config.py:1527 checks it under fp8 only). Multi-token prediction layers are
  // built under get_fp8_context, a no-op without fp8 (multi_token_prediction.py:1927).
  job.quantized.storage = Storage::nvfp4;
  job.quantized.mtp_layers = false;
  if (first_last_bf16) {
    job.quantized.bf16_first_layers = start;
    job.quantized.bf16_last_layers = end;
  }
  // optimizer_config.py:407-413 reads --fp8-recipe only: with its default, delayed, NVFP4
  // params take the precision-aware optimizer's path for non-fp8 params.
  job.optimizer.quantized_params_not_delayed =
      a.string("--fp8-recipe").value_or("delayed") != "delayed";
  job.notes.push_back(fmt::format(
      "nvfp4 params: Transformer Engine linears' weights in the decoder layers are NVFP4 "
      "tensors, packed two values a byte in uint8 param buffers with offsets of their own "
      "(their scales and column-wise copies are Transformer Engine's own storage, not "
      "counted){}",
      first_last_bf16 ? fmt::format("; the first {} and last {} layers stay bfloat16", start, end)
                      : std::string()));
}

}  // namespace

void read_quantized_params(ArgMap& a, JobSpec& job) {
  const bool fp8_param = a.flag("--fp8-param-gather");
  const bool fp4_param = a.flag("--fp4-param-gather");
  const std::optional<std::string> fp8 = a.string("--fp8-format");
  const std::optional<std::string> fp4 = a.string("--fp4-format");
  const std::string recipe = a.string("--fp8-recipe").value_or("delayed");
  const bool first_last_bf16 = a.flag("--first-last-layers-bf16");
  const std::int64_t start = a.integer("--num-layers-at-start-in-bf16", 1, -(1 << 30), 1 << 30);
  const std::int64_t end = a.integer("--num-layers-at-end-in-bf16", 1, -(1 << 30), 1 << 30);
  const bool reuse_grad_buf = a.flag("--reuse-grad-buf-for-mxfp8-param-ag");
  const bool cpu_offload = a.flag("--optimizer-cpu-offload");
  if (a.failed()) return;
  if (fp8 && fp4) {
    a.fail("--fp4-format", "cannot be combined with --fp8-format (arguments.py:1100)");
    return;
  }
  if (reuse_grad_buf && !fp8_param) {
    a.fail("--reuse-grad-buf-for-mxfp8-param-ag",
           "needs --fp8-param-gather (distributed_data_parallel_config.py:259-260)");
    return;
  }
  if (fp4_param) {
    read_fp4_params(a, job, first_last_bf16, start, end);
    return;
  }
  if (fp8 && first_last_bf16) {
    // transformer_config.py:1529-1554.
    if (recipe == "delayed") {
      a.fail("--first-last-layers-bf16",
             "delayed scaling does not support first / last "
             "layer in BF16 (transformer_config.py:1530)");
      return;
    }
    const std::int64_t most = job.model.num_layers() / job.parallel.pp;
    for (const auto& [name, n] :
         {std::pair<std::string_view, std::int64_t>{"--num-layers-at-start-in-bf16", start},
          {"--num-layers-at-end-in-bf16", end}}) {
      if (n < 0 || n > most) {
        a.fail(name, fmt::format("{} must be between 0 and the layers per pipeline stage ({}) "
                                 "(transformer_config.py:1539-1554)",
                                 n, most));
        return;
      }
    }
  }
  if (reuse_grad_buf && (!fp8 || recipe != "mxfp8")) {
    job.notes.emplace_back(
        "--reuse-grad-buf-for-mxfp8-param-ag has no effect without the "
        "mxfp8 recipe");
  }
  if (!fp8_param) return;
  if (!fp8) {
    a.fail("--fp8-param-gather",
           "must be used together with fp8 mode, --fp8-format "
           "(transformer_config.py:1566)");
    return;
  }
  if (!job.optimizer.distributed) {
    a.fail("--fp8-param-gather",
           "only supported with the distributed optimizer, torch FSDP2, "
           "Megatron-FSDP or inference mode (arguments.py:1096)");
    return;
  }
  if (recipe == "custom") {
    a.fail("--fp8-recipe",
           "a custom recipe's quantizers are the user's own: their storage "
           "cannot be known ahead of time");
    return;
  }
  if (cpu_offload && recipe != "delayed") {
    a.fail("--optimizer-cpu-offload",
           "with --fp8-param-gather needs --fp8-recipe delayed "
           "(arguments.py:1889-1892)");
    return;
  }
  if (recipe == "mxfp8") {
    // DDP maps each quantized param into its param buffer with TE's replace_raw_data
    // (param_and_grad_buffer.py:1263-1291, fp8_utils.py:414-419), which raises for an
    // MXFP8Tensor (TE tensor/utils.py:68-69); with the flag it skips them
    // (param_and_grad_buffer.py:1262-1264) and all-gathers into the grad buffer.
    if (!reuse_grad_buf) {
      a.fail("--fp8-recipe",
             "mxfp8 params cannot be mapped into DDP's param buffer (Transformer Engine's "
             "replace_raw_data raises for MXFP8Tensor: tensor/utils.py:68-69, from "
             "param_and_grad_buffer.py:1291); add --reuse-grad-buf-for-mxfp8-param-ag");
      return;
    }
    if (job.overlap_param_gather_with_optimizer_step) {
      a.fail("--overlap-param-gather-with-optimizer-step",
             "is not supported with --reuse-grad-buf-for-mxfp8-param-ag "
             "(optimizer_config.py:427-431)");
      return;
    }
  }
  // delayed, tensorwise, blockwise: Float8Tensor / Float8BlockwiseQTensor, one byte per
  // element in a uint8 param buffer (param_and_grad_buffer.py:921-923); mxfp8: MXFP8Tensor,
  // whose param buffer is a bfloat16 view of the grad buffer
  // (param_and_grad_buffer.py:1162-1179).
  job.quantized.storage = recipe == "mxfp8" ? Storage::mxfp8 : Storage::fp8;
  if (first_last_bf16) {
    job.quantized.bf16_first_layers = start;
    job.quantized.bf16_last_layers = end;
  }
  job.optimizer.quantized_params_not_delayed = recipe != "delayed";
  job.notes.push_back(fmt::format(
      "fp8 params ({} recipe): Transformer Engine linears' weights are quantized tensors, {}{}",
      recipe,
      recipe == "mxfp8" ? "their param buffers bfloat16 views of the grad buffers, all-gathered "
                          "in bfloat16 (--reuse-grad-buf-for-mxfp8-param-ag); the MXFP8 "
                          "tensors themselves are Transformer Engine's own storage, not counted"
                        : "one byte per element in uint8 param buffers",
      first_last_bf16 ? fmt::format("; the first {} and last {} layers stay bfloat16", start, end)
                      : std::string()));
}

}  // namespace job
}  // namespace paramlayout
