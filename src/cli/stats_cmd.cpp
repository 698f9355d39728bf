// paramlayout stats: the quality figures of an existing layout.
#include <fmt/format.h>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/stats.hpp"
#include "summary.hpp"

namespace paramlayout::cli {

void setup_stats(CLI::App& sub, StatsCommand& command) {
  add_layout_with_manifest(sub, command.layout, command.manifest,
                           "The manifest it was planned from (shapes)");
  sub.add_flag("--json", command.json, "One JSON object on stdout");
  add_link_gbps(sub, command.link_gbps);
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_stats(const StatsCommand& command) {
  Result<LayoutWithManifest> inputs =
      load_layout_with_manifest(command.layout, command.manifest, command.max_input);
  if (!inputs) return inputs.error();
  const Manifest& manifest = inputs->manifest;
  const Layout& layout = inputs->layout;
  const Result<LayoutStats> stats = layout_stats(layout, manifest);
  if (!stats) return stats.error();
  if (command.json) {
    fmt::print("{}\n", stats_to_json(*stats, command.link_gbps));
    return kExitOk;
  }
  const PlanOptions& options = layout.options;
  fmt::print("{}: {}{}, dp {}{}\n", display_name(command.layout), to_string(options.strategy),
             options.strategy == Strategy::layerwise
                 ? fmt::format(" ({} packer)", to_string(options.packer))
                 : std::string(),
             options.dp,
             options.expert_dp != options.dp ? fmt::format(", expert dp {}", options.expert_dp)
                                             : std::string());
  print_stats(stdout, *stats, command.link_gbps);
  print_traffic_table(stdout, layout, *stats);
  warn_if_far_off(display_name(command.layout), manifest, layout, *stats);
  return kExitOk;
}

}  // namespace paramlayout::cli
