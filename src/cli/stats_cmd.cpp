// paramlayout stats: the quality figures of an existing layout, or of every chunk of a job.
#include <fmt/format.h>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "job_table.hpp"
#include "memory_table.hpp"
#include "paramlayout/job_stats.hpp"
#include "paramlayout/stats.hpp"
#include "summary.hpp"

namespace paramlayout::cli {
namespace {

/// stats JOB: the job's header and table, then what each stage sends per step.
Result<ExitCode> run_job_stats(const StatsCommand& command) {
  if (Result<void> usage = layout_or_job_usage(true, command.layout, command.manifest); !usage) {
    return usage.error();
  }
  Result<std::optional<GpuBudget>> gpu = gpu_budget(command.gpu);
  if (!gpu) return gpu.error();
  Result<JobWithStats> loaded = load_job_with_stats(command.layout, command.max_input);
  if (!loaded) return loaded.error();
  const JobRecord& record = loaded->job.job.record;
  if (command.json) {
    fmt::print("{}\n", job_stats_to_json(record, loaded->stats, command.link_gbps));
    return kExitOk;
  }
  const bool expert_buffers = has_expert_buffers(loaded->job);
  print_job_header(stdout, record,
                   {.experts = expert_buffers || record.parallel.ep > 1,
                    .expert_buffers = expert_buffers,
                    .optimizer_state = record.optimizer_state});
  print_job_table(stdout, record, loaded->stats);
  print_job_traffic_table(stdout, record, loaded->stats, command.link_gbps);
  if (!record.memory.empty()) {
    print_memory_table(stdout, record.memory_inputs, record.memory, *gpu,
                       command.gpu.headroom_bytes());
  }
  return kExitOk;
}

}  // namespace

void setup_stats(CLI::App& sub, StatsCommand& command) {
  add_layout_or_job(sub, command.layout, command.manifest);
  sub.add_flag("--json", command.json, "One JSON object on stdout");
  add_link_gbps(sub, command.link_gbps);
  add_gpu_memory_options(sub, command.gpu);
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_stats(const StatsCommand& command) {
  if (is_job_input(command.layout)) return run_job_stats(command);
  if (command.manifest.empty()) {
    // What is wrong with the layout first: a file that is missing or not a layout.
    if (Result<Layout> layout = load_layout(command.layout, command.max_input); !layout) {
      return layout.error();
    }
    return layout_or_job_usage(false, command.layout, command.manifest).error();
  }
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
