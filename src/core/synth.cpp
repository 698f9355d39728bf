// synth: a Hugging Face config -> the model description -> one pipeline stage's chunk.
#include "paramlayout/synth.hpp"

#include <fmt/format.h>

#include <limits>

#include "paramlayout/hf_config.hpp"

namespace paramlayout {

Result<SynthModel> synth_model(std::string_view config_text, std::string_view source,
                               const SynthOptions& options) {
  Result<HfModel> hf = read_hf_config(config_text, source);
  if (!hf) return hf.error();
  ModelSpec& spec = hf->spec;
  spec.make_vocab_size_divisible_by = options.vocab_divisible_by;
  const TensorSplit split{options.tp, options.ep, options.etp > 0 ? options.etp : options.tp};
  const auto problem = [&](const std::string& what) {
    return Error{fmt::format("{}: {}", source, what)};
  };
  if (options.stage >= options.pp) {
    return problem(fmt::format("--stage {} is not below --pp {}", options.stage, options.pp));
  }
  if (std::optional<std::string> p = split_problem(spec, split)) return problem("--" + *p);
  if (std::optional<std::string> p = size_problem(spec, split)) return problem(*p);

  PipelineConfig pipeline;
  pipeline.num_layers = spec.num_layers();
  pipeline.pp = options.pp;
  pipeline.mtp_num_layers = spec.mtp_num_layers;
  Result<std::vector<ChunkPlacement>> chunks = place_layers(pipeline);
  if (!chunks) return problem(chunks.error().message);
  if (std::optional<std::string> p = pipeline_problem(spec, options.pp)) return problem(*p);
  const ChunkPlacement& placement = (*chunks)[static_cast<std::size_t>(options.stage)];

  SynthModel model;
  static_cast<ModelChunk&>(model) = build_chunk(spec, split, placement);
  if (model.numel() == std::numeric_limits<std::int64_t>::max()) {
    return problem("the chunk's elements add up to more than 2^63: too large");
  }
  model.architecture = hf->architecture;
  model.notes = std::move(hf->notes);
  model.parallel.tp = options.tp;
  model.parallel.pp = options.pp;
  model.parallel.ep = options.ep;
  model.parallel.etp = split.etp;
  model.parallel.stage = options.stage;
  return model;
}

std::string synth_manifest_json(const SynthModel& model, DType dtype) {
  return write_manifest_json(chunk_manifest(model, model.model, dtype, &model.parallel));
}

}  // namespace paramlayout
