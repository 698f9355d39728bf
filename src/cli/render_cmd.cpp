// paramlayout render: a layout, or a whole job, as an SVG picture.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "job_table.hpp"
#include "paramlayout/render.hpp"

namespace paramlayout::cli {
namespace {

/// The picture's file name in an output directory: NAME.svg for a layout NAME.json, job.svg
/// for a job; none for stdin.
std::string file_name_for(const std::string& layout, bool job) {
  if (job) return "job.svg";
  return layout == "-" ? std::string() : std::filesystem::path(layout).stem().string() + ".svg";
}

/// render JOB: every chunk's layout, with the job's figures.
Result<std::string> render_job(const std::string& path, std::uint64_t max_input) {
  Result<JobWithStats> loaded = load_job_with_stats(path, max_input);
  if (!loaded) return loaded.error();
  std::vector<const Layout*> layouts;
  for (const JobChunkInput& c : loaded->job.chunks) layouts.push_back(&c.layout);
  return render_job_svg(loaded->job.job.record, loaded->stats, layouts);
}

}  // namespace

void setup_render(CLI::App& sub, RenderCommand& command) {
  sub.add_option("LAYOUT", command.layout,
                 "Layout v1 JSON file, or a job: its directory or job.json")
      ->type_name("FILE|JOB")
      ->required();
  sub.add_option("-o,--output", command.output,
                 "Write the SVG here (atomically) instead of stdout; a directory (a path ending "
                 "in '/' or an existing one, created if missing) gets NAME.svg for NAME.json, "
                 "job.svg for a job")
      ->type_name("FILE|DIR/");
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_render(const RenderCommand& command) {
  const bool job = is_job_input(command.layout);
  Result<std::string> svg = job ? render_job(command.layout, command.max_input) : [&] {
    Result<Layout> layout = load_layout(command.layout, command.max_input);
    return layout ? render_svg(*layout) : Result<std::string>(layout.error());
  }();
  if (!svg) return svg.error();
  Result<std::string> target = output_target(command.output, file_name_for(command.layout, job));
  Result<void> written = target ? write_output(*target, *svg) : Result<void>(target.error());
  if (!written) return written.error();
  return kExitOk;
}

}  // namespace paramlayout::cli
