// paramlayout synth: a Hugging Face config.json -> manifest v1 of one rank's chunk.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "commands.hpp"
#include "flags.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/synth.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

/// "llama3-8b-tp8-pp4-stage0": the config's folder or file name and the non-trivial splits.
std::string default_model_name(const SynthCommand& c) {
  const std::filesystem::path path(c.config);
  std::string name = c.config == "-" ? std::string("model")
                     : path.filename() == "config.json" && path.has_parent_path()
                         ? path.parent_path().filename().string()
                         : path.stem().string();
  if (c.tp > 1) name += fmt::format("-tp{}", c.tp);
  if (c.pp > 1) name += fmt::format("-pp{}-stage{}", c.pp, c.stage);
  if (c.ep > 1) name += fmt::format("-ep{}", c.ep);
  if (c.etp > 0) name += fmt::format("-etp{}", c.etp);
  return name;
}

/// The manifest's file name in an output directory: MODEL.json.
std::string file_name_for(const std::string& model) {
  std::string file = model + ".json";
  std::replace(file.begin(), file.end(), '/', '-');
  return file;
}

}  // namespace

void setup_synth(CLI::App& sub, SynthCommand& command) {
  sub.add_option("CONFIG", command.config, "The model's config.json")->type_name("FILE");
  sub.add_option("--tp", command.tp, "Tensor-parallel size")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
  sub.add_option("--pp", command.pp, "Pipeline-parallel size")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
  sub.add_option("--stage", command.stage, "This chunk's pipeline stage, from 0")
      ->check(integer_in(0, 1023))
      ->capture_default_str();
  sub.add_option("--ep", command.ep, "Expert-parallel size")
      ->check(integer_in(1, 4096))
      ->capture_default_str();
  sub.add_option("--etp", command.etp, "Expert tensor-parallel size [default: tp]")
      ->check(integer_in(1, 1024));
  sub.add_option("--vocab-divisible-by", command.vocab_divisible_by,
                 "Pad the vocabulary to a multiple of this times tp, as Megatron-LM does")
      ->check(integer_in(1, 1 << 20))
      ->capture_default_str();
  sub.add_option("--dtype", command.dtype,
                 "The params' dtype: bfloat16 (bf16), float16 (fp16, half) or float32 (fp32, "
                 "float), also as torch.bfloat16 ...")
      ->type_name("D")
      ->check(dtype_name())
      ->capture_default_str();
  sub.add_option("--model", command.model,
                 "The manifest's model name [default: from the "
                 "config's path and the splits]");
  sub.add_option("-o,--output", command.output,
                 "Write the manifest here (atomically) instead of stdout; a directory (a path "
                 "ending in '/' or an existing one, created if missing) gets MODEL.json")
      ->type_name("FILE|DIR/");
  sub.add_flag("-q,--quiet", command.quiet, "No summary");
  sub.add_flag("--list", command.list,
               "Print the config.json architectures it knows, with their models");
  add_max_input_size(sub, command.max_input);
}

namespace {

void print_architectures() {
  const std::vector<HfArchitecture> list = hf_architecture_list();
  std::size_t width = 0;
  for (const HfArchitecture& a : list) width = std::max(width, a.name.size());
  for (const HfArchitecture& a : list) fmt::print("{:<{}}  {}\n", a.name, width, a.models);
}

}  // namespace

Result<ExitCode> run_synth(const SynthCommand& command) {
  if (command.list) {
    print_architectures();
    return kExitOk;
  }
  if (command.config.empty()) {
    return Error{"synth: CONFIG is required (or --list for the architectures it knows)"};
  }
  Result<std::string> text = read_file(command.config, command.max_input);
  if (!text) return text.error();
  SynthOptions options;
  options.tp = command.tp;
  options.pp = command.pp;
  options.stage = command.stage;
  options.ep = command.ep;
  options.etp = command.etp;
  options.vocab_divisible_by = command.vocab_divisible_by;
  options.dtype = *parse_dtype_alias(command.dtype);
  Result<SynthModel> model = synth_model(*text, command.config, options);
  if (!model) return model.error();
  model->model = command.model.empty() ? default_model_name(command) : command.model;
  Result<std::string> target = output_target(command.output, file_name_for(model->model));
  const bool to_stdout = target && *target == "-";
  Result<void> written = target ? write_output(*target, synth_manifest_json(*model, options.dtype))
                                : Result<void>(target.error());
  if (!written) return written.error();
  if (!command.quiet) {
    std::FILE* out = to_stdout ? stderr : stdout;
    std::int64_t experts = 0;
    for (const ChunkParam& p : model->params) experts += p.expert_parallel ? p.numel() : 0;
    std::string parts;
    if (experts > 0) parts += fmt::format(", {} in experts", group_digits(experts));
    if (model->vocab_padding > 0) {
      parts += fmt::format(", {} of vocab padding", group_digits(model->vocab_padding));
    }
    fmt::print(out, "{}: {} ({}), {} params, {} elements{}\n", model->model, model->architecture,
               display_name(command.config), model->params.size(), group_digits(model->numel()),
               parts);
    for (const std::string& note : model->notes) fmt::print(out, "  note: {}\n", note);
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
