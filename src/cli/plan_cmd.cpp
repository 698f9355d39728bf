// paramlayout plan: manifest -> layout JSON, with a summary for people.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "commands.hpp"
#include "flags.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/plan_chunk.hpp"
#include "summary.hpp"

namespace paramlayout::cli {
namespace {

/// Milliseconds since the last lap (or construction).
class Stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

PlanOptions options_from(const PlanCommand& command) {
  PlanOptions options;
  options.strategy = *parse_strategy(command.strategy);
  options.dp = command.dp;
  options.expert_dp = command.expert_dp > 0 ? command.expert_dp : command.dp;
  if (command.bucket_size.empty()) {
    options.bucket_size = ddp_fallback_bucket_size(command.dp);
  } else if (command.bucket_size != "none") {
    options.bucket_size = parse_integer(command.bucket_size);
  }
  options.grad_reduce_in_fp32 = command.grad_reduce_in_fp32;
  options.pad_for_high_nccl_busbw = command.pad_for_high_nccl_busbw;
  options.packer = *parse_packer(command.packer);
  return options;
}

}  // namespace

void setup_plan(CLI::App& sub, PlanCommand& command) {
  sub.add_option("MANIFEST", command.manifests,
                 "Manifest v1 JSON file ('-' for stdin); several (one per pipeline stage or "
                 "virtual chunk) need -o DIR/")
      ->type_name("FILE")
      ->required();
  sub.add_option("--dp", command.dp, "Data-parallel size (ranks a buffer is sharded over)")
      ->required()
      ->check(integer_in(1, kMaxDp));
  sub.add_option("--strategy", command.strategy,
                 "sequential-dp (DistributedOptimizer), layerwise (Muon) or unpadded (plain "
                 "DDP)")
      ->type_name("NAME")
      ->check(one_of({"sequential-dp", "layerwise", "unpadded"}))
      ->capture_default_str();
  sub.add_option("--expert-dp", command.expert_dp, "Expert data-parallel size [default: dp]")
      ->check(integer_in(1, kMaxDp));
  sub.add_option("--bucket-size", command.bucket_size,
                 "Elements per bucket, or 'none' for one bucket per buffer "
                 "[default: max(40000000, 1000000 * dp)]")
      ->type_name("N|none")
      ->check(one_of({"none"}, /*or_positive_integer=*/true));
  sub.add_flag("--grad-reduce-in-fp32", command.grad_reduce_in_fp32,
               "Reduce gradients in float32 buffers");
  sub.add_flag("--pad-for-high-nccl-busbw", command.pad_for_high_nccl_busbw,
               "Pad bucket ends to a multiple of 65536 too");
  sub.add_option("--packer", command.packer,
                 "Layerwise packing: megatron (Megatron-LM's, bit-exact) or balanced (the "
                 "same promises, less padding)")
      ->type_name("NAME")
      ->check(one_of({"megatron", "balanced"}))
      ->capture_default_str();
  sub.add_option("-o,--output", command.output,
                 "Write the layout here (atomically) instead of stdout; a directory (a path "
                 "ending in '/' or an existing one, created if missing) gets NAME.layout.json "
                 "per manifest NAME.json, and several manifests need one")
      ->type_name("FILE|DIR/");
  sub.add_flag("-q,--quiet", command.quiet, "No summary");
  sub.add_flag("--timings", command.timings, "Print the time of each phase on stderr");
  add_link_gbps(sub, command.link_gbps);
  add_max_input_size(sub, command.max_input);
}

namespace {

/// One chunk read and planned, with the times of its phases.
struct PlannedChunk {
  Manifest manifest;
  Layout layout;
  LayoutStats stats;
  std::string output;
  double read_ms = 0;
  double validate_ms = 0;
  double plan_ms = 0;
};

Result<PlannedChunk> read_and_plan(const std::string& path, const PlanOptions& options,
                                   std::uint64_t max_input) {
  Stopwatch phase;
  Result<std::string> text = read_file(path, max_input);
  if (!text) return text.error();
  ParseTimings timings;
  const double read_ms = phase.lap();
  Result<Manifest> manifest = parse_manifest(*text, path == "-" ? "<stdin>" : path, &timings);
  if (!manifest) return manifest.error();
  double plan_ms = 0;
  Result<ChunkPlan> planned = plan_chunk(*manifest, options, &plan_ms);
  if (!planned) return planned.error();
  return PlannedChunk{std::move(*manifest),
                      std::move(planned->layout),
                      std::move(planned->stats),
                      {},
                      read_ms + timings.parse_ms,
                      timings.validate_ms,
                      plan_ms};
}

/// Where each chunk's layout goes, by the -o rule (io.hpp): stdout or a file for one
/// manifest; for a directory, DIR/NAME.layout.json for each manifest NAME.json. Several
/// manifests need a directory.
Result<void> assign_outputs(const PlanCommand& command, std::vector<PlannedChunk>& chunks) {
  const OutputKind kind = output_kind(command.output);
  if (kind != OutputKind::directory) {
    if (chunks.size() > 1) {
      return Error{fmt::format(
          "several manifests need -o DIR/ (a path ending in '/' or an existing directory), "
          "which gets one NAME.layout.json per manifest{}",
          kind == OutputKind::file ? fmt::format("; '{}' names a file", excerpt(command.output))
                                   : std::string())};
    }
    chunks[0].output = kind == OutputKind::file ? command.output : "-";
    return {};
  }
  std::set<std::string> taken;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const std::string& source = command.manifests[i];
    if (source == "-") {
      return Error{
          "-o DIR/ names each layout after its manifest file, and '-' (stdin) has no "
          "name: give -o FILE"};
    }
    const std::string name = std::filesystem::path(source).stem().string() + ".layout.json";
    if (!taken.insert(name).second) {
      return Error{source + ": another manifest also makes " + name + "; rename one"};
    }
    chunks[i].output = (std::filesystem::path(command.output) / name).string();
  }
  return make_output_directory(command.output);
}

/// What a Megatron-LM job would do differently from these options, for the manifests that
/// record their parallel config (synth, job).
void warn_about_job_differences(const PlanCommand& command, const PlannedChunk& c) {
  const std::string& name = c.manifest.source;
  const std::optional<ParallelConfig>& parallel = c.manifest.parallel;
  const PlanOptions& o = c.layout.options;
  const bool experts = std::any_of(c.manifest.params.begin(), c.manifest.params.end(),
                                   [](const Param& p) { return p.expert_parallel; });
  if (parallel && parallel->ep > 1 && experts && command.expert_dp == 0) {
    // world = dp x tp x pp (dp counting context-parallel ranks); expert dp = world / (etp x
    // ep x pp).
    const std::int64_t ranks = o.dp * parallel->tp;
    const std::int64_t group = parallel->ep * parallel->etp;
    const std::string should = ranks % group == 0
                                   ? fmt::format("dp x tp / (ep x etp) = {}", ranks / group)
                                   : std::string("fewer");
    print_warning(fmt::format(
        "{}: its experts are split over ep {} (etp {}), so Megatron-LM shards their buffers "
        "over {} ranks, not dp {}; pass --expert-dp or plan the whole job with paramlayout job",
        name, parallel->ep, parallel->etp, should, o.dp));
  }
  const bool bf16 = std::any_of(c.manifest.params.begin(), c.manifest.params.end(),
                                [](const Param& p) { return p.dtype == DType::bfloat16; });
  if (bf16 && !o.grad_reduce_in_fp32) {
    print_note(fmt::format(
        "{}: bfloat16 grad buffers; a Megatron-LM job with --bf16 reduces grads in float32 "
        "unless it passes --grad-reduce-in-bf16 (plan with --grad-reduce-in-fp32 to see that "
        "job's buffers)",
        name));
  }
}

}  // namespace

Result<ExitCode> run_plan(const PlanCommand& command) {
  Stopwatch total;
  const PlanOptions options = options_from(command);
  std::vector<PlannedChunk> chunks;
  for (const std::string& path : command.manifests) {
    Result<PlannedChunk> chunk = read_and_plan(path, options, command.max_input);
    if (!chunk) return chunk.error();
    chunks.push_back(std::move(*chunk));
  }
  if (Result<void> assigned = assign_outputs(command, chunks); !assigned) return assigned.error();

  Stopwatch phase;
  for (const PlannedChunk& c : chunks) {
    if (Result<void> written =
            write_output(c.output, write_layout_json(c.layout, stats_to_json(c.stats)));
        !written) {
      return written.error();
    }
  }
  const double write_ms = phase.lap();

  const bool to_stdout = chunks.size() == 1 && chunks[0].output == "-";
  std::FILE* out = to_stdout ? stderr : stdout;
  if (!command.quiet) {
    for (const PlannedChunk& c : chunks) warn_about_job_differences(command, c);
    for (const PlannedChunk& c : chunks) {
      print_plan_summary(out, c.manifest, c.layout, c.stats, command.link_gbps);
      warn_if_far_off(c.manifest.source, c.manifest, c.layout, c.stats);
    }
    if (chunks.size() > 1) {
      std::vector<ChunkSummary> rows;
      for (const PlannedChunk& c : chunks) {
        rows.push_back({c.layout.model.value_or(c.output), &c.layout, &c.stats});
      }
      print_pipeline_summary(out, rows);
    }
  }
  if (command.timings) {
    double read_ms = 0;
    double validate_ms = 0;
    double plan_ms = 0;
    for (const PlannedChunk& c : chunks) {
      read_ms += c.read_ms;
      validate_ms += c.validate_ms;
      plan_ms += c.plan_ms;
    }
    fmt::print(stderr,
               "timings: parse {:.1f} ms, validate {:.1f} ms, plan {:.1f} ms, write {:.1f} ms, "
               "total {:.1f} ms\n",
               read_ms, validate_ms, plan_ms, write_ms, total.lap());
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
