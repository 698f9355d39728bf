// paramlayout render: a layout as an SVG picture.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/render.hpp"

namespace paramlayout::cli {
namespace {

/// The picture's file name in an output directory: NAME.svg for a layout NAME.json; none for
/// stdin.
std::string file_name_for(const std::string& layout) {
  return layout == "-" ? std::string() : std::filesystem::path(layout).stem().string() + ".svg";
}

}  // namespace

void setup_render(CLI::App& sub, RenderCommand& command) {
  sub.add_option("LAYOUT", command.layout, "Layout v1 JSON file")->type_name("FILE")->required();
  sub.add_option("-o,--output", command.output,
                 "Write the SVG here (atomically) instead of stdout; a directory (a path ending "
                 "in '/' or an existing one, created if missing) gets NAME.svg for NAME.json")
      ->type_name("FILE|DIR/");
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_render(const RenderCommand& command) {
  Result<Layout> layout = load_layout(command.layout, command.max_input);
  if (!layout) return layout.error();
  Result<std::string> svg = render_svg(*layout);
  if (!svg) return svg.error();
  Result<std::string> target = output_target(command.output, file_name_for(command.layout));
  Result<void> written = target ? write_output(*target, *svg) : Result<void>(target.error());
  if (!written) return written.error();
  return kExitOk;
}

}  // namespace paramlayout::cli
