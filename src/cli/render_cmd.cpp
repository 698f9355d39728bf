// paramlayout render: a layout as an SVG picture.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/render.hpp"

namespace paramlayout::cli {
namespace {

/// Where the picture goes by the -o rule (io.hpp): stdout, a file, or DIR/NAME.svg for a
/// layout NAME.json.
Result<std::string> output_path(const std::string& output, const std::string& layout) {
  switch (output_kind(output)) {
    case OutputKind::standard_output:
      return std::string("-");
    case OutputKind::file:
      return output;
    case OutputKind::directory:
      break;
  }
  if (layout == "-") {
    return Error{"-o DIR/ names the picture after its layout file, and '-' (stdin) has no "
                 "name: give -o FILE"};
  }
  if (Result<void> made = make_output_directory(output); !made) return made.error();
  const std::string name = std::filesystem::path(layout).stem().string() + ".svg";
  return (std::filesystem::path(output) / name).string();
}

}  // namespace

CLI::App* setup_render(CLI::App& app, RenderCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "render", "Draw a layout as SVG: buckets by shards, params coloured by layer");
  sub->add_option("LAYOUT", command.layout, "Layout v1 JSON file")->type_name("FILE")->required();
  sub->add_option("-o,--output", command.output,
                  "Write the SVG here (atomically) instead of stdout; a directory (a path ending "
                  "in '/' or an existing one, created if missing) gets NAME.svg for NAME.json")
      ->type_name("FILE|DIR/");
  add_max_input_size(*sub, command.max_input);
  return sub;
}

int run_render(const RenderCommand& command) {
  Result<Layout> layout = load_layout(command.layout, command.max_input);
  if (!layout) {
    print_error(layout.error());
    return kExitBadInput;
  }
  Result<std::string> svg = render_svg(*layout);
  if (!svg) {
    print_error(svg.error());
    return kExitBadInput;
  }
  Result<std::string> target = output_path(command.output, command.layout);
  Result<void> written = target ? write_output(*target, *svg) : Result<void>(target.error());
  if (!written) {
    print_error(written.error());
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
