#include "layout_strings.hpp"

#include <algorithm>
#include <numeric>

#include "paramlayout/model_chunk.hpp"

namespace paramlayout::search {
namespace {

std::int64_t elements(const ModelSpec& model, const ChunkPlacement& placement) {
  return build_chunk(model, TensorSplit{}, placement).numel();
}

/// `part` in units of `unit`, rounded to the nearest.
std::int64_t in_units(std::int64_t part, std::int64_t unit) {
  return unit > 0 ? (2 * part + unit) / (2 * unit) : 0;
}

}  // namespace

EndWeights end_weights(const ModelSpec& model) {
  const std::int64_t layers = model.num_layers();
  if (layers == 0 || model.hybrid) return {};
  ChunkPlacement decoder;
  decoder.layers.resize(static_cast<std::size_t>(layers));
  std::iota(decoder.layers.begin(), decoder.layers.end(), 0);
  decoder.pipeline_parallel = true;
  const std::int64_t layer = elements(model, decoder) / layers;

  ChunkPlacement first;
  first.pre_process = true;
  first.pipeline_parallel = true;
  ChunkPlacement last;
  last.post_process = true;
  last.final_norm = true;
  last.pipeline_parallel = true;
  last.layer_offset = layers;
  last.mtp_layers.resize(static_cast<std::size_t>(model.mtp_num_layers));
  std::iota(last.mtp_layers.begin(), last.mtp_layers.end(), 0);
  return {in_units(elements(model, first), layer), in_units(elements(model, last), layer)};
}

bool wants_layout_strings(const ModelSpec& model, const EndWeights& weights) {
  return !model.hybrid && (model.mtp_num_layers > 0 || weights.embedding > 0 || weights.loss > 0);
}

std::vector<std::string> balanced_layout(std::int64_t layers, std::int64_t mtp_layers,
                                         std::int64_t stages, const EndWeights& weights) {
  const std::int64_t units = layers + weights.embedding + weights.loss;
  // The decoder layers before stage i's first: round(i x units / stages), less the
  // embedding's weight, within [0, layers].
  const auto boundary = [&](std::int64_t i) {
    const std::int64_t b = (2 * i * units + stages) / (2 * stages) - weights.embedding;
    return i == stages ? layers : std::clamp<std::int64_t>(b, 0, layers);
  };
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < stages; ++i) {
    std::string stage = i == 0 ? "E" : "";
    stage.append(static_cast<std::size_t>(boundary(i + 1) - boundary(i)), 't');
    if (i == stages - 1) stage.append(static_cast<std::size_t>(mtp_layers), 'm').append("L");
    out.push_back(std::move(stage));
  }
  return out;
}

}  // namespace paramlayout::search
