// The pipeline layout strings a search tries for models whose ends weigh as much as decoder
// layers: the embedding on the first virtual stage, the output layer and the multi-token
// prediction layers on the last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "paramlayout/model.hpp"

namespace paramlayout::search {

/// How many decoder layers the two ends of the model weigh, by their params (rounded).
struct EndWeights {
  std::int64_t embedding = 0;  ///< the first stage's embedding ('E')
  std::int64_t loss = 0;       ///< the last stage's final norm, output layer and 'm' layers
};

/// The ends' weights of `model`, against its mean decoder layer.
EndWeights end_weights(const ModelSpec& model);

/// Whether a search tries layout strings for `model`: it has multi-token prediction layers or
/// an end that weighs a decoder layer or more, and its builder reads a layout (not a hybrid
/// pattern).
bool wants_layout_strings(const ModelSpec& model, const EndWeights& weights);

/// The stages of a layout of `layers` decoder layers and `mtp_layers` multi-token prediction
/// layers over `stages` virtual stages, their loads (decoder layers, plus the end's weight on
/// the first and last) as even as the counts allow: every stage's load rises to one level,
/// an end that weighs that much alone holding no decoder layer, and the boundaries are the
/// running sums rounded. The 'm' layers go with 'L'.
std::vector<std::string> balanced_layout(std::int64_t layers, std::int64_t mtp_layers,
                                         std::int64_t stages, const EndWeights& weights);

}  // namespace paramlayout::search
