// paramlayout plan: manifest -> layout JSON, with a summary for people.
#include <fmt/format.h>

#include <chrono>

#include "commands.hpp"
#include "flags.hpp"
#include "io.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/plan.hpp"
#include "summary.hpp"

namespace paramlayout::cli {
namespace {

/// Milliseconds since the last lap (or construction).
class Stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

PlanOptions options_from(const PlanCommand& command) {
  PlanOptions options;
  options.strategy = *parse_strategy(command.strategy);
  options.dp = command.dp;
  options.expert_dp = command.expert_dp > 0 ? command.expert_dp : command.dp;
  if (command.bucket_size.empty()) {
    options.bucket_size = default_bucket_size(command.dp);
  } else if (command.bucket_size != "none") {
    options.bucket_size = parse_integer(command.bucket_size);
  }
  options.grad_reduce_in_fp32 = command.grad_reduce_in_fp32;
  options.pad_for_high_nccl_busbw = command.pad_for_high_nccl_busbw;
  return options;
}

}  // namespace

CLI::App* setup_plan(CLI::App& app, PlanCommand& command) {
  CLI::App* sub = app.add_subcommand("plan", "Plan the buffer layout of a manifest");
  sub->add_option("MANIFEST", command.manifest, "Manifest v1 JSON file ('-' for stdin)")
      ->type_name("FILE")
      ->required();
  sub->add_option("--dp", command.dp, "Data-parallel size (ranks a buffer is sharded over)")
      ->required()
      ->check(integer_in(1, kMaxDp));
  sub->add_option("--strategy", command.strategy,
                  "sequential-dp (DistributedOptimizer), layerwise (Muon) or unpadded (plain "
                  "DDP)")
      ->type_name("NAME")
      ->check(one_of({"sequential-dp", "layerwise", "unpadded"}))
      ->capture_default_str();
  sub->add_option("--expert-dp", command.expert_dp, "Expert data-parallel size [default: dp]")
      ->check(integer_in(1, kMaxDp));
  sub->add_option("--bucket-size", command.bucket_size,
                  "Elements per bucket, or 'none' for one bucket per buffer "
                  "[default: max(40000000, 1000000 * dp)]")
      ->type_name("N|none")
      ->check(one_of({"none"}, /*or_positive_integer=*/true));
  sub->add_flag("--grad-reduce-in-fp32", command.grad_reduce_in_fp32,
                "Reduce gradients in float32 buffers");
  sub->add_flag("--pad-for-high-nccl-busbw", command.pad_for_high_nccl_busbw,
                "Pad bucket ends to a multiple of 65536 too");
  sub->add_option("-o,--output", command.output,
                  "Write the layout here (atomically) instead of stdout")
      ->type_name("FILE");
  sub->add_flag("-q,--quiet", command.quiet, "No summary");
  sub->add_flag("--timings", command.timings, "Print the time of each phase on stderr");
  return sub;
}

int run_plan(const PlanCommand& command) {
  Stopwatch total;
  Stopwatch phase;
  Result<std::string> text = read_file(command.manifest);
  if (!text) {
    print_error(text.error());
    return kExitBadInput;
  }
  const std::string source = command.manifest == "-" ? "<stdin>" : command.manifest;
  ParseTimings parse_timings;
  const double read_ms = phase.lap();
  Result<Manifest> manifest = parse_manifest(*text, source, &parse_timings);
  if (!manifest) {
    print_error(manifest.error());
    return kExitBadInput;
  }
  phase.lap();

  Result<Layout> layout = plan(*manifest, options_from(command));
  if (!layout) {
    print_error(layout.error());
    return kExitBadInput;
  }
  const double plan_ms = phase.lap();

  const bool to_stdout = command.output.empty() || command.output == "-";
  if (Result<void> written =
          write_file_atomically(to_stdout ? "-" : command.output, write_layout_json(*layout));
      !written) {
    print_error(written.error());
    return kExitBadInput;
  }
  const double write_ms = phase.lap();

  if (!command.quiet) print_plan_summary(to_stdout ? stderr : stdout, *manifest, *layout);
  if (command.timings) {
    fmt::print(stderr,
               "timings: parse {:.1f} ms, validate {:.1f} ms, plan {:.1f} ms, write {:.1f} ms, "
               "total {:.1f} ms\n",
               read_ms + parse_timings.parse_ms, parse_timings.validate_ms, plan_ms, write_ms,
               total.lap());
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
