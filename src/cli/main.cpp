// paramlayout: plan and verify the parameter and gradient buffer layouts of distributed
// data-parallel training. main only wires the subcommands.
#include <CLI/CLI.hpp>

#include <string>

#include "commands.hpp"
#include "paramlayout/version.hpp"

int main(int argc, char** argv) {
  using namespace paramlayout::cli;
  CLI::App app{"Plan and verify Megatron-LM parameter/gradient buffer layouts", "paramlayout"};
  app.set_version_flag("--version", std::string("paramlayout ") +
                                        std::string(paramlayout::kVersion));
  app.require_subcommand(1);

  PlanCommand plan;
  CLI::App* plan_app = setup_plan(app, plan);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (plan_app->parsed()) return run_plan(plan);
  return kExitBadInput;
}
