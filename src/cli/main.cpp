// paramlayout: plan and verify the parameter and gradient buffer layouts of distributed
// data-parallel training. main only wires the subcommands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "io.hpp"
#include "paramlayout/version.hpp"

int main(int argc, char** argv) {
  using namespace paramlayout::cli;
  CLI::App app{"Plan and verify Megatron-LM parameter/gradient buffer layouts", "paramlayout"};
  app.set_version_flag("--version", std::string("paramlayout ") +
                                        std::string(paramlayout::kVersion) + " (verify: " +
                                        std::string(paramlayout::kVerifyFeatures) + ")");
  app.require_subcommand(1);

  PlanCommand plan;
  CheckCommand check;
  VerifyCommand verify;
  DiffCommand diff;
  SynthCommand synth;
  StatsCommand stats;
  RenderCommand render;
  JobCommand job;
  CLI::App* plan_app = setup_plan(app, plan);
  CLI::App* check_app = setup_check(app, check);
  CLI::App* verify_app = setup_verify(app, verify);
  CLI::App* diff_app = setup_diff(app, diff);
  CLI::App* synth_app = setup_synth(app, synth);
  CLI::App* stats_app = setup_stats(app, stats);
  CLI::App* render_app = setup_render(app, render);
  CLI::App* job_app = setup_job(app, job);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error(paramlayout::Error{e.what()});
    std::fprintf(stderr, "Run 'paramlayout --help' or 'paramlayout SUBCOMMAND --help' for usage.\n");
    return kExitBadInput;
  }
  if (plan_app->parsed()) return run_plan(plan);
  if (check_app->parsed()) return run_check(check);
  if (verify_app->parsed()) return run_verify(verify);
  if (diff_app->parsed()) return run_diff(diff);
  if (synth_app->parsed()) return run_synth(synth);
  if (stats_app->parsed()) return run_stats(stats);
  if (render_app->parsed()) return run_render(render);
  if (job_app->parsed()) return run_job(job);
  return kExitBadInput;
}
