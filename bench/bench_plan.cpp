// Times the plan phase alone (manifest already parsed): the least CPU time of this thread
// over N runs per point (a machine shared with other work deschedules the process, which
// CPU time does not count), N as many rounds as fit in about kRoundsMs (at least 3, at most
// 200), or `--runs N`. Several choices (comma-separated) are timed in interleaved rounds, so
// that a slow spell of the machine weighs on each alike and their ratio holds.
// Usage: bench_plan [--runs N] MANIFEST STRATEGY[/PACKER][,STRATEGY[/PACKER]...] DP [DP...]
#include <fmt/format.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "paramlayout/plan.hpp"

namespace {

/// This thread's CPU time, in milliseconds.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace paramlayout;
  int fixed_runs = 0;  // none: as many as fit in kRoundsMs
  if (argc > 2 && std::string_view(argv[1]) == "--runs") {
    fixed_runs = std::max(1, std::atoi(argv[2]));
    argc -= 2;
    argv += 2;
  }
  if (argc < 4) {
    fmt::print(stderr,
               "usage: bench_plan [--runs N] MANIFEST STRATEGY[/PACKER][,...] DP [DP...]\n");
    return 2;
  }
  struct Choice {
    std::string_view name;
    Strategy strategy;
    Packer packer;
  };
  std::vector<Choice> choices;
  for (std::string_view list = argv[2]; !list.empty();) {
    const std::size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    const std::size_t slash = name.find('/');
    const std::optional<Strategy> strategy = parse_strategy(name.substr(0, slash));
    const std::optional<Packer> packer =
        slash == std::string_view::npos ? Packer::megatron : parse_packer(name.substr(slash + 1));
    if (!strategy || !packer) {
      fmt::print(stderr, "bench_plan: unknown strategy or packer '{}'\n", name);
      return 2;
    }
    choices.push_back({name, *strategy, *packer});
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  Result<Manifest> manifest = parse_manifest(text.str(), argv[1]);
  if (!manifest) {
    fmt::print(stderr, "{}\n", manifest.error().message);
    return 2;
  }
  constexpr double kRoundsMs = 200;
  for (int i = 3; i < argc; ++i) {
    std::vector<PlanOptions> options(choices.size());
    std::vector<double> best(choices.size(), 1e30);
    for (std::size_t c = 0; c < choices.size(); ++c) {
      options[c].strategy = choices[c].strategy;
      options[c].packer = choices[c].packer;
      options[c].dp = options[c].expert_dp = std::stoll(argv[i]);
      options[c].bucket_size = ddp_fallback_bucket_size(options[c].dp);
    }
    int runs = fixed_runs > 0 ? fixed_runs : 1;  // else the first round tells how many
    for (int r = 0; r < runs; ++r) {
      double round_ms = 0;
      for (std::size_t c = 0; c < choices.size(); ++c) {
        const double start = thread_cpu_ms();
        Result<Layout> layout = plan(*manifest, options[c]);
        const double ms = thread_cpu_ms() - start;
        if (!layout) {
          fmt::print(stderr, "{}\n", layout.error().message);
          return 2;
        }
        best[c] = std::min(best[c], ms);
        round_ms += ms;
      }
      if (r == 0 && fixed_runs == 0) {
        runs = static_cast<int>(std::clamp(kRoundsMs / round_ms, 3.0, 200.0));
      }
    }
    for (std::size_t c = 0; c < choices.size(); ++c) {
      fmt::print("{} {} dp {}: plan {:.4f} ms CPU (best of {})\n",
                 manifest->model.value_or(argv[1]), choices[c].name, options[c].dp, best[c], runs);
    }
  }
  return 0;
}
