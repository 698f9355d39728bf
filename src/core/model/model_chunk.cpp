// A chunk's params in named_parameters() order: the embedding, the decoder layers, the
// decoder's final norm, the multi-token prediction layers, then the output layer.
#include "paramlayout/model_chunk.hpp"

#include <fmt/format.h>

#include <limits>

#include "param_emitter.hpp"

namespace paramlayout {
namespace {

constexpr std::int64_t kSaturated = std::numeric_limits<std::int64_t>::max();

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return kSaturated;
  }
  return n;
}

bool divides(std::int64_t d, std::int64_t n) { return n % d == 0; }

std::optional<std::string> attention_split_problem(const ModelSpec& m, const TensorSplit& s) {
  if (!divides(s.tp, m.num_attention_heads)) {
    return fmt::format("tp {} does not divide the {} attention heads", s.tp, m.num_attention_heads);
  }
  if (m.mla) return std::nullopt;
  std::vector<LayerSpec> all = m.layers;
  for (const LayerSpec& l : m.mtp_layer_specs()) all.push_back(l);
  for (const LayerSpec& l : all) {
    if (l.attends() && !divides(s.tp, m.attention_heads(l))) {
      return fmt::format("tp {} does not divide the {} attention heads", s.tp,
                         m.attention_heads(l));
    }
    const std::int64_t groups = m.query_groups(l);
    if (l.attends() && !divides(s.tp, groups) && !divides(groups, s.tp)) {
      return fmt::format("tp {} is neither a multiple nor a divisor of the {} key/value heads",
                         s.tp, groups);
    }
  }
  return std::nullopt;
}

std::optional<std::string> mixer_split_problem(const ModelSpec& m, const TensorSplit& s) {
  if (m.uses_attention()) {
    if (std::optional<std::string> p = attention_split_problem(m, s)) return p;
  }
  if (m.uses_mamba()) {
    const std::int64_t heads = m.mamba.heads(m.hidden_size);
    if (!divides(s.tp, heads)) {
      return fmt::format("tp {} does not divide the {} Mamba heads", s.tp, heads);
    }
    if (!divides(s.tp, m.mamba.num_groups)) {
      return fmt::format("tp {} does not divide the {} Mamba groups", s.tp, m.mamba.num_groups);
    }
  }
  if (m.uses(Mixer::gated_delta_net)) {
    const GatedDeltaNetSpec& g = m.gated_delta_net;
    if (!divides(s.tp, g.num_key_heads) || !divides(s.tp, g.num_value_heads)) {
      return fmt::format(
          "tp {} does not divide the linear attention's {} key and {} value "
          "heads",
          s.tp, g.num_key_heads, g.num_value_heads);
    }
  }
  if ((m.uses(Mixer::linear) || m.uses(Mlp::linear) || m.mtp_num_layers > 0) &&
      !divides(s.tp, m.hidden_size)) {
    return fmt::format("tp {} does not divide the hidden size {}", s.tp, m.hidden_size);
  }
  return std::nullopt;
}

}  // namespace

std::int64_t ChunkParam::numel() const { return product(shape); }

std::int64_t ModelChunk::numel() const {
  std::int64_t n = 0;
  for (const ChunkParam& p : params) {
    if (__builtin_add_overflow(n, p.numel(), &n)) return kSaturated;
  }
  return n;
}

std::int64_t padded_vocab_size(const ModelSpec& model, std::int64_t tp) {
  const std::int64_t multiple =
      model.make_vocab_size_divisible_by * (model.vocab_padding_times_tp ? tp : 1);
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

std::optional<std::string> size_problem(const ModelSpec& m, const TensorSplit& s) {
  // A layer holds a few dozen params and four per local expert.
  const std::int64_t local_experts = m.moe.num_experts / s.ep;
  const std::int64_t layers = m.num_layers() + m.mtp_num_layers;
  if (layers * (64 + 4 * local_experts) > kMaxChunkParams) {
    return fmt::format(
        "{} layers with {} experts each on a rank come to more than {} params: "
        "too large",
        layers, local_experts, kMaxChunkParams);
  }
  return std::nullopt;
}

/// The vocab-parallel embeddings split their rows, and per_layer_model_proj its outputs, tp
/// ways exactly (VocabUtility and ColumnParallelLinear divide).
std::optional<std::string> embedding_split_problem(const ModelSpec& m, const TensorSplit& s) {
  if (!divides(s.tp, padded_vocab_size(m, s.tp))) {
    return fmt::format("tp {} does not divide the padded vocabulary of {}", s.tp,
                       padded_vocab_size(m, s.tp));
  }
  const PerLayerInputSpec& per_layer = m.per_layer_input;
  if (per_layer.size == 0) return std::nullopt;
  if (!divides(s.tp, per_layer.vocab_size)) {
    return fmt::format("tp {} does not divide the per-layer input vocabulary of {}", s.tp,
                       per_layer.vocab_size);
  }
  if (!divides(s.tp, m.num_layers() * per_layer.size)) {
    return fmt::format("tp {} does not divide the {} per-layer input channels", s.tp,
                       m.num_layers() * per_layer.size);
  }
  return std::nullopt;
}

std::optional<std::string> split_problem(const ModelSpec& m, const TensorSplit& s) {
  if (std::optional<std::string> p = mixer_split_problem(m, s)) return p;
  if (std::optional<std::string> p = embedding_split_problem(m, s)) return p;
  for (const LayerSpec& l : m.layers) {
    if (l.mlp == Mlp::dense && !divides(s.tp, m.dense_ffn(l))) {
      return fmt::format("tp {} does not divide the MLP size {}", s.tp, m.dense_ffn(l));
    }
  }
  if (!m.uses(Mlp::moe)) {
    if (s.ep > 1) return fmt::format("ep {} needs a mixture-of-experts model", s.ep);
    return std::nullopt;
  }
  if (!divides(s.ep, m.moe.num_experts)) {
    return fmt::format("ep {} does not divide the {} experts", s.ep, m.moe.num_experts);
  }
  if (!divides(s.etp, m.moe.ffn_hidden_size)) {
    return fmt::format("etp {} does not divide the expert MLP size {}", s.etp,
                       m.moe.ffn_hidden_size);
  }
  if (!divides(s.tp, m.moe.shared_expert_size)) {
    return fmt::format("tp {} does not divide the shared expert MLP size {}", s.tp,
                       m.moe.shared_expert_size);
  }
  return std::nullopt;
}

std::optional<std::string> pipeline_problem(const ModelSpec& m, std::int64_t chunks) {
  if (chunks > 1 && !m.one_stage_only.empty()) return m.one_stage_only;
  return std::nullopt;
}

std::vector<LayerSpec> chunk_layers(const ModelSpec& model, const ChunkPlacement& placement) {
  std::vector<LayerSpec> layers;
  for (std::int64_t l : placement.layers) {
    layers.push_back(model.layers[static_cast<std::size_t>(l)]);
  }
  for (std::int64_t i : placement.mtp_layers) {
    if (model.hybrid) {
      layers.insert(layers.end(), model.hybrid_mtp_layers.begin(), model.hybrid_mtp_layers.end());
    } else {
      layers.push_back(model.mtp_layer(i, placement.layer_offset));
    }
  }
  return layers;
}

ModelChunk build_chunk(const ModelSpec& model, const TensorSplit& split,
                       const ChunkPlacement& placement) {
  ModelChunk chunk;
  model::ParamEmitter emit(model, split, chunk);
  const bool tied = !model.untie_embeddings_and_output_weights;
  const bool mtp = !placement.mtp_layers.empty();
  const bool has_embedding = placement.pre_process || mtp;
  const bool has_output = placement.post_process || (model.hybrid && mtp);
  const bool output_weight = has_output && !(placement.pre_process && tied);
  // Copies of the embedding weight that are reduced together across stages.
  const bool shares = placement.pipeline_parallel && (tied || model.mtp_num_layers > 0);
  const bool shared_copy =
      shares && ((placement.post_process && tied) || mtp) && !placement.pre_process;
  const bool shared_first = shares && placement.pre_process && !placement.post_process;

  if (has_embedding) emit.embedding(shared_first || (shared_copy && has_embedding));
  std::int64_t local = 0;
  for (std::int64_t global : placement.layers) {
    emit.layer(fmt::format("decoder.layers.{}.", local++),
               model.layers[static_cast<std::size_t>(global)]);
  }
  if (placement.final_norm) emit.final_norm();
  for (std::int64_t i : placement.mtp_layers) emit.mtp_layer(i, placement.layer_offset);
  if (output_weight) emit.output_layer(shared_copy && !has_embedding);
  if (placement.pre_process && model.per_layer_input.size > 0) emit.per_layer_inputs();

  const std::int64_t pad_rows = (padded_vocab_size(model, split.tp) - model.vocab_size) / split.tp;
  for (const ChunkParam& p : chunk.params) {
    if (p.embedding_or_output) chunk.vocab_padding += pad_rows * model.hidden_size;
  }
  return chunk;
}

Manifest chunk_manifest(const ModelChunk& chunk, std::string_view model, DType dtype,
                        const ParallelConfig* parallel) {
  Manifest manifest;
  manifest.model = std::string(model);
  if (parallel != nullptr) manifest.parallel = *parallel;
  manifest.params.reserve(chunk.params.size());
  for (const ChunkParam& c : chunk.params) {
    Param& p = manifest.params.emplace_back();
    p.name = manifest.names->add(c.name);
    p.shape = c.shape;
    p.numel = c.numel();
    p.dtype = dtype;
    p.expert_parallel = c.expert_parallel;
    p.embedding_or_output = c.embedding_or_output;
    p.shared_embedding = c.shared_embedding;
    p.use_muon = c.use_muon;
    p.storage = c.storage;
  }
  return manifest;
}

}  // namespace paramlayout
