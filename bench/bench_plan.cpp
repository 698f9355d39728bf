// Times the plan phase alone (manifest already parsed): the best of N runs per point.
// Usage: bench_plan MANIFEST STRATEGY[/PACKER] DP [DP...]
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "paramlayout/plan.hpp"

int main(int argc, char** argv) {
  using namespace paramlayout;
  if (argc < 4) {
    fmt::print(stderr, "usage: bench_plan MANIFEST STRATEGY[/PACKER] DP [DP...]\n");
    return 2;
  }
  const std::string_view choice = argv[2];
  const std::size_t slash = choice.find('/');
  const std::optional<Strategy> strategy = parse_strategy(choice.substr(0, slash));
  const std::optional<Packer> packer =
      slash == std::string_view::npos ? Packer::megatron : parse_packer(choice.substr(slash + 1));
  if (!strategy || !packer) {
    fmt::print(stderr, "bench_plan: unknown strategy or packer '{}'\n", choice);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  Result<Manifest> manifest = parse_manifest(text.str(), argv[1]);
  if (!manifest) {
    fmt::print(stderr, "{}\n", manifest.error().message);
    return 2;
  }
  for (int i = 3; i < argc; ++i) {
    PlanOptions o;
    o.strategy = *strategy;
    o.packer = *packer;
    o.dp = o.expert_dp = std::stoll(argv[i]);
    o.bucket_size = default_bucket_size(o.dp);
    double best = 1e30;
    const int runs = manifest->params.size() > 100000 ? 3 : manifest->params.size() > 1000 ? 20 : 200;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      Result<Layout> layout = plan(*manifest, o);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (!layout) return 2;
      best = std::min(best, ms);
    }
    fmt::print("{} {} dp {}: plan {:.3f} ms (best of {})\n", manifest->model.value_or(argv[1]),
               argv[2], o.dp, best, runs);
  }
  return 0;
}
