// paramlayout: plan and verify the parameter and gradient buffer layouts of distributed
// data-parallel training. main holds the table of subcommands, parses the command line,
// runs the one named and prints the error it returns, if any.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "io.hpp"
#include "paramlayout/version.hpp"

namespace paramlayout::cli {
namespace {

/// One subcommand, as ninja keeps its tools: its name and one line for --help, the function
/// that declares its flags, and the one that runs it.
struct Command {
  std::string name;
  std::string description;
  std::function<void(CLI::App&)> setup;
  std::function<Result<ExitCode>()> run;
  /// Takes Megatron-LM's arguments after `--`, verbatim; empty for a command without them.
  std::function<void(std::vector<std::string>)> take_launch_args;
};

/// A subcommand whose flags are read into an `Options` of its own.
template <class Options>
Command command(std::string name, std::string description, void (*setup)(CLI::App&, Options&),
                Result<ExitCode> (*run)(const Options&)) {
  auto options = std::make_shared<Options>();
  Command out{std::move(name),
              std::move(description),
              [setup, options](CLI::App& sub) { setup(sub, *options); },
              [run, options] { return run(*options); },
              {}};
  if constexpr (requires { options->args = std::vector<std::string>{}; }) {
    out.take_launch_args = [options](std::vector<std::string> args) {
      options->args = std::move(args);
    };
  }
  return out;
}

/// The index of the `--` that starts the launch arguments of a command that takes them
/// (`job ... -- ARGS`), or `argc` when there is none. CLI11 would read an argument such as
/// "[0,1,1,1]" (`--moe-layer-freq`) as a list of four; Megatron-LM's parser takes it whole.
int launch_args_start(int argc, char** argv, const std::vector<Command>& table,
                      const Command*& taker) {
  taker = nullptr;
  const Command* named = nullptr;  // the subcommand: the first argument naming one
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      if (named == nullptr || !named->take_launch_args) return argc;
      taker = named;
      return i;
    }
    for (const Command& c : table) {
      if (named == nullptr && arg == c.name) named = &c;
    }
  }
  return argc;
}

/// Every subcommand, in the order --help lists them.
std::vector<Command> commands() {
  return {
      command("plan", "Plan the buffer layout of a manifest", setup_plan, run_plan),
      command("check",
              "Check a layout against its manifest and every promise of "
              "docs/strategies.md",
              setup_check, run_check),
      command("verify",
              "Check a layout, then move real buffers with reduce-scatter and "
              "all-gather",
              setup_verify, run_verify),
      command("diff", "Show what changed between two jobs or two layouts", setup_diff, run_diff),
      command("synth", "Write the manifest of one rank's chunk of a Hugging Face model config",
              setup_synth, run_synth),
      command("stats",
              "Padding against its floor, Newton-Schulz balance, memory per rank and "
              "traffic per step",
              setup_stats, run_stats),
      command("render", "Draw a layout as SVG: buckets by shards, params coloured by layer",
              setup_render, run_render),
      command("job",
              "Plan every stage and chunk of a Megatron-LM training job from its "
              "launch line",
              setup_job, run_job),
      command("search",
              "Every launch of a model on N GPUs that Megatron-LM accepts, planned and "
              "ranked",
              setup_search, run_search),
  };
}

}  // namespace
}  // namespace paramlayout::cli

int main(int argc, char** argv) {
  using namespace paramlayout::cli;
  CLI::App app{"Plan and verify Megatron-LM parameter/gradient buffer layouts", "paramlayout"};
  app.set_version_flag("--version",
                       std::string("paramlayout ") + std::string(paramlayout::kVersion) +
                           " (verify: " + std::string(paramlayout::kVerifyFeatures) + ")");
  app.require_subcommand(1);
  const std::vector<Command> table = commands();
  for (const Command& c : table) c.setup(*app.add_subcommand(c.name, c.description));

  const Command* taker = nullptr;
  const int dash = launch_args_start(argc, argv, table, taker);
  try {
    app.parse(dash, argv);
    if (taker != nullptr && dash < argc) {
      taker->take_launch_args(std::vector<std::string>(argv + dash + 1, argv + argc));
    }
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error(paramlayout::Error{e.what()});
    std::fprintf(stderr,
                 "Run 'paramlayout --help' or 'paramlayout SUBCOMMAND --help' for usage.\n");
    return kExitBadInput;
  }
  for (const Command& c : table) {
    if (!app.got_subcommand(c.name)) continue;
    const paramlayout::Result<ExitCode> code = c.run();
    if (!code) {
      print_error(code.error());
      return kExitBadInput;
    }
    return *code;
  }
  return kExitBadInput;
}
