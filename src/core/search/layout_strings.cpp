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
  const auto count = static_cast<std::size_t>(stages);
  std::vector<std::int64_t> end_weight(count, 0);
  end_weight.front() += weights.embedding;
  end_weight.back() += weights.loss;
  // Water-filling: every stage's load rises to the level num / den, where an end that
  // weighs that much already takes no decoder layer and leaves the level to the others.
  std::vector<bool> filled(count, true);
  std::int64_t num = 0;
  std::int64_t den = 0;
  for (bool changed = true; changed;) {
    num = layers;
    den = 0;
    for (std::size_t j = 0; j < count; ++j) {
      if (!filled[j]) continue;
      num += end_weight[j];
      ++den;
    }
    changed = false;
    for (std::size_t j = 0; j < count; ++j) {
      if (filled[j] && end_weight[j] * den >= num) {
        filled[j] = false;
        changed = true;
      }
    }
  }
  // Stage j holds level - its end's weight, in reals; the boundaries are their running sums,
  // rounded, so the counts add up to `layers`.
  std::vector<std::string> out;
  std::int64_t scaled = 0;  // the running sum x den
  std::int64_t before = 0;
  for (std::size_t j = 0; j < count; ++j) {
    if (filled[j]) scaled += num - end_weight[j] * den;
    const std::int64_t boundary =
        j + 1 == count ? layers : std::min(layers, (2 * scaled + den) / (2 * den));
    std::string stage = j == 0 ? "E" : "";
    stage.append(static_cast<std::size_t>(boundary - before), 't');
    if (j + 1 == count) stage.append(static_cast<std::size_t>(mtp_layers), 'm').append("L");
    out.push_back(std::move(stage));
    before = boundary;
  }
  return out;
}

}  // namespace paramlayout::search
