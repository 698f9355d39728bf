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
constexpr std::array<std::string_view, 12> kTeLinears = {
    "linear_qkv",         "linear_proj",         "linear_fc1",         "linear_fc2",
    "linear_q_proj",      "linear_q_down_proj",  "linear_q_up_proj",   "linear_kv_down_proj",
    "linear_kv_up_proj",  "in_proj",             "out_proj",           "eh_proj"};

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
/// final norm: never under fp8_model_init).
std::optional<std::int64_t> layer_of(std::string_view name, const ChunkPlacement& placement) {
  if (name.substr(0, 11) == "mtp.layers.") return -1;
  constexpr std::string_view kDecoder = "decoder.layers.";
  if (name.substr(0, kDecoder.size()) != kDecoder) return std::nullopt;
  std::size_t i = kDecoder.size();
  std::size_t local = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') local = local * 10 + (name[i++] - '0');
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
    if (!layer) continue;
    // fp8_utils.py:711-727: is_first_last_bf16_layer, on the global layer index.
    const bool bf16 = *layer >= 0 &&
                      (*layer < q.bf16_first_layers || *layer >= num_layers - q.bf16_last_layers);
    if (!bf16) p.storage = q.storage;
  }
}

namespace job {

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
  if (a.failed()) return;
  if (fp8 && fp4) {
    a.fail("--fp4-format", "cannot be combined with --fp8-format (arguments.py:1100)");
    return;
  }
  if (fp4_param) {
    a.fail("--fp4-param-gather",
           fp4 ? "NVFP4 params pack two values a byte into a param buffer of its own layout "
                 "(param_and_grad_buffer.py:1088-1130), which paramlayout does not model"
               : "must be used together with --fp4-format (arguments.py:1105)");
    return;
  }
  if (fp8 && first_last_bf16) {
    // transformer_config.py:1529-1554.
    if (recipe == "delayed") {
      a.fail("--first-last-layers-bf16", "delayed scaling does not support first / last "
                                         "layer in BF16 (transformer_config.py:1530)");
      return;
    }
    const std::int64_t most = job.model.num_layers() / job.parallel.pp;
    for (const auto& [name, n] : {std::pair<std::string_view, std::int64_t>{
                                      "--num-layers-at-start-in-bf16", start},
                                  {"--num-layers-at-end-in-bf16", end}}) {
      if (n < 0 || n > most) {
        a.fail(name, fmt::format("{} must be between 0 and the layers per pipeline stage ({}) "
                                 "(transformer_config.py:1539-1554)", n, most));
        return;
      }
    }
  }
  if (fp8 && recipe == "mxfp8" && !fp8_param) {
    a.fail("--fp8-recipe", "mxfp8 needs --fp8-param-gather (arguments.py:1576)");
    return;
  }
  if (reuse_grad_buf && (!fp8 || recipe != "mxfp8")) {
    job.notes.emplace_back("--reuse-grad-buf-for-mxfp8-param-ag has no effect without the "
                           "mxfp8 recipe");
  }
  if (!fp8_param) return;
  if (!fp8) {
    a.fail("--fp8-param-gather", "must be used together with fp8 mode, --fp8-format "
                                 "(transformer_config.py:1566)");
    return;
  }
  if (!job.optimizer.distributed) {
    a.fail("--fp8-param-gather", "only supported with the distributed optimizer, torch FSDP2, "
                                 "Megatron-FSDP or inference mode (arguments.py:1096)");
    return;
  }
  if (recipe == "mxfp8") {
    a.fail("--fp8-recipe", "mxfp8 params share their all-gather with the grad buffer "
                           "(param_and_grad_buffer.py:1164-1180, "
                           "--reuse-grad-buf-for-mxfp8-param-ag), which paramlayout's buffers do "
                           "not model yet");
    return;
  }
  if (recipe == "custom") {
    a.fail("--fp8-recipe", "a custom recipe's quantizers are the user's own: their storage "
                           "cannot be known ahead of time");
    return;
  }
  // delayed, tensorwise, blockwise: Float8Tensor / Float8BlockwiseQTensor, one byte per
  // element in a uint8 param buffer (param_and_grad_buffer.py:921-923).
  job.quantized.storage = Storage::fp8;
  if (first_last_bf16) {
    job.quantized.bf16_first_layers = start;
    job.quantized.bf16_last_layers = end;
  }
  job.optimizer.quantized_params_not_delayed = recipe != "delayed";
  job.notes.push_back(fmt::format(
      "fp8 params ({} recipe): Transformer Engine linears' weights are quantized tensors, one "
      "byte per element in uint8 param buffers{}",
      recipe,
      first_last_bf16 ? fmt::format("; the first {} and last {} layers stay bfloat16", start, end)
                      : std::string()));
}

}  // namespace job
}  // namespace paramlayout
