// paramlayout check: every promise of docs/strategies.md, without a GPU.
#include <fmt/format.h>

#include "check_job.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "paramlayout/check.hpp"

namespace paramlayout::cli {
namespace {

std::size_t bucket_count(const Layout& layout) {
  std::size_t n = 0;
  for (const BufferLayout& b : layout.buffers) n += b.buckets.size();
  return n;
}

std::size_t param_count(const Layout& layout) {
  std::size_t n = 0;
  for (const BufferLayout& b : layout.buffers) n += b.params.size();
  return n;
}

}  // namespace

void setup_check(CLI::App& sub, CheckCommand& command) {
  add_layout_or_job(sub, command.layout, command.manifest);
  sub.add_flag("--replan", command.replan,
               "Also plan again and report any difference: a job from the launch job.json "
               "records (its config's hash must still match), a layout from its manifest with "
               "the recorded options");
  sub.add_option("--against-log", command.against_log,
                 "A job only: also hold it against Megatron-LM start-up logs (\"-\": stdin): "
                 "every DDP bucket report and param count they hold")
      ->type_name("LOG")
      ->expected(1, -1);
  sub.add_option("--limit", command.limit, "Print at most N broken promises (0: all)")
      ->type_name("N");
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_check(const CheckCommand& command) {
  if (is_job_input(command.layout)) return run_check_job(command);
  if (!command.against_log.empty()) {
    return Error{
        "--against-log holds a job against its logs: give the job's directory or "
        "job.json"};
  }
  if (Result<void> usage = layout_or_job_usage(false, command.layout, command.manifest); !usage) {
    return usage.error();
  }
  Result<LayoutWithManifest> inputs =
      load_layout_with_manifest(command.layout, command.manifest, command.max_input);
  if (!inputs) return inputs.error();
  const Manifest& manifest = inputs->manifest;
  const Layout& layout = inputs->layout;
  std::vector<Violation> violations = check_layout(layout, manifest);
  for (Violation& v : check_recorded_stats(layout, manifest)) violations.push_back(std::move(v));
  if (command.replan) {
    for (Violation& v : compare_with_replan(layout, manifest)) {
      v.what = "stale: " + v.what;
      violations.push_back(std::move(v));
    }
  }
  const std::string name = display_name(command.layout);
  if (violations.empty()) {
    fmt::print("{}: holds: {} params, {} buffer{}, {} buckets keep every promise{}\n", name,
               param_count(layout), layout.buffers.size(), layout.buffers.size() == 1 ? "" : "s",
               bucket_count(layout),
               command.replan ? ", and a fresh plan gives the same layout" : "");
    return kExitOk;
  }
  const std::size_t shown =
      command.limit == 0 ? violations.size() : std::min(command.limit, violations.size());
  for (std::size_t i = 0; i < shown; ++i) fmt::print("{}: {}\n", name, violations[i].message());
  if (shown < violations.size()) {
    fmt::print("{}: ... and {} more (--limit 0 shows all)\n", name, violations.size() - shown);
  }
  fmt::print("{}: broken: {} problem{}\n", name, violations.size(),
             violations.size() == 1 ? "" : "s");
  return kExitWrong;
}

}  // namespace paramlayout::cli
