// paramlayout render: a layout as an SVG picture.
#include <fmt/format.h>

#include "commands.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/render.hpp"

namespace paramlayout::cli {

CLI::App* setup_render(CLI::App& app, RenderCommand& command) {
  CLI::App* sub = app.add_subcommand(
      "render", "Draw a layout as SVG: buckets by shards, params coloured by layer");
  sub->add_option("LAYOUT", command.layout, "Layout v1 JSON file")->type_name("FILE")->required();
  sub->add_option("-o,--output", command.output, "Write the SVG here (atomically) instead of "
                                                 "stdout")
      ->type_name("FILE");
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
  const std::string target = command.output.empty() ? "-" : command.output;
  if (Result<void> written = write_output(target, *svg); !written) {
    print_error(written.error());
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
