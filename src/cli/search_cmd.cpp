// paramlayout search: every launch of a model on N GPUs that Megatron-LM accepts, each
// planned as `job` plans it, ranked by whether it fits and by its estimated step time.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "commands.hpp"
#include "flags.hpp"
#include "io.hpp"
#include "job_directory.hpp"
#include "launch.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/search.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) { g_interrupted = true; }

/// While alive, Ctrl-C (SIGINT) asks the search to stop instead of ending the process.
class InterruptStopsSearch {
 public:
  InterruptStopsSearch() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptStopsSearch() { sigaction(SIGINT, &previous_, nullptr); }
  InterruptStopsSearch(const InterruptStopsSearch&) = delete;
  InterruptStopsSearch& operator=(const InterruptStopsSearch&) = delete;

 private:
  struct sigaction previous_ {};
};

Result<SearchSpace> search_space(const SearchCommand& c) {
  SearchSpace space;
  space.tp = c.tp;
  space.pp = c.pp;
  space.vpp = c.vpp;
  space.cp = c.cp;
  space.ep = c.ep;
  space.etp = c.etp;
  space.max_pp = c.max_pp;
  space.max_tensor_parallel = c.gpus_per_node;
  const auto dimension = [](std::string_view option,
                            const std::string& name) -> Result<SearchDimension> {
    if (const std::optional<SearchDimension> d = parse_search_dimension(name)) return *d;
    return Error{
        fmt::format("{}: expected tp, pp, vpp, cp, ep, etp, split, sequence-parallel, "
                    "recompute, distributed-optimizer or optimizer-instances, got '{}'",
                    option, name)};
  };
  for (const std::string& name : c.vary) {
    Result<SearchDimension> d = dimension("--vary", name);
    if (!d) return d.error();
    std::erase(space.fixed, *d);
  }
  for (const std::string& name : c.fix) {
    Result<SearchDimension> d = dimension("--fix", name);
    if (!d) return d.error();
    space.fixed.push_back(*d);
  }
  return space;
}

std::string bytes_text(std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

std::string seconds_text(double s) {
  return s >= 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.2f} s", s);
}

void print_candidates(const std::vector<SearchCandidate>& ranked, std::size_t top,
                      const SearchBudget& budget) {
  fmt::print(
      "\n  {:>3}  {:>3} {:>3} {:>3} {:>3} {:>3} {:>3} {:>5} {:>3}  {:<9}  {:<4}  {:>5}"
      "  {:>10}  {:>11}  {:>10}  {:>6}  {:>7}\n",
      "#", "tp", "pp", "vpp", "cp", "ep", "etp", "dp", "sp", "recompute", "dist", "stage", "peak",
      budget.gpu_bytes ? "room" : "", "traffic", "bubble", "step");
  for (std::size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    const SearchCandidate& c = ranked[i];
    const ParallelConfig& p = c.parallel;
    std::string room;
    if (budget.gpu_bytes) {
      const std::int64_t r = *budget.gpu_bytes - budget.headroom - c.heaviest.peak_bytes;
      room = (r >= 0 ? "+" : "-") + bytes_text(r >= 0 ? r : -r);
    }
    fmt::print(
        "  {:>3}  {:>3} {:>3} {:>3} {:>3} {:>3} {:>3} {:>5} {:>3}  {:<9}  {:<4}  {:>5}"
        "  {:>10}  {:>11}  {:>10}  {:>5.1f}%  {:>7}\n",
        i + 1, p.tp, p.pp, p.vpp, p.cp, p.ep, p.etp, c.dp, c.sequence_parallel ? "yes" : "-",
        to_string(c.recompute), c.distributed_optimizer ? "yes" : "no", c.heaviest.stage,
        bytes_text(c.heaviest.peak_bytes), room, bytes_text(c.step.traffic.total()),
        100 * c.step.bubble_fraction, seconds_text(c.step.step_seconds()));
    fmt::print("       {}\n", c.added_args.empty()
                                  ? "(your arguments as given)"
                                  : fmt::format("{}", fmt::join(c.added_args, " ")));
  }
}

void print_rejected(const SearchResult& result, bool explain) {
  std::int64_t refused = 0;
  for (const RejectedReason& r : result.rejected) refused += r.count;
  if (refused == 0) return;
  if (!explain) {
    fmt::print("\n  {} launches Megatron-LM refuses are not listed (--explain-rejected: why)\n",
               group_digits(refused));
    return;
  }
  fmt::print("\n  refused, by reason:\n");
  for (const RejectedReason& r : result.rejected) {
    fmt::print("  {:>9}  {}\n", group_digits(r.count), r.example);
  }
}

/// The top candidates' jobs, each written whole into DIR/N.
Result<void> write_candidate_jobs(const SearchCommand& command, const SearchRequest& request,
                                  const std::vector<SearchCandidate>& ranked) {
  if (Result<void> made = make_output_directory(command.output); !made) return made;
  for (std::size_t i = 0; i < std::min(command.top, ranked.size()); ++i) {
    LaunchRecord launch;
    launch.world_size = request.world_size;
    launch.args = request.args;
    launch.args.insert(launch.args.end(), ranked[i].added_args.begin(), ranked[i].added_args.end());
    if (!command.hf_config.empty()) launch.hf_config = command.hf_config;
    if (!command.model.empty()) launch.model = command.model;
    Result<PlannedLaunch> planned = plan_launch(launch, std::nullopt);
    if (!planned) return planned.error();
    const std::string dir = fmt::format("{}/{}", command.output, i + 1);
    const LaunchRecord recorded = record_launch(launch, planned->files, dir);
    if (Result<void> written = write_job_directory(
            dir, job_files(planned->spec, planned->plan, recorded, planned->kept_files()),
            command.replace);
        !written) {
      return written.error();
    }
  }
  return {};
}

}  // namespace

void setup_search(CLI::App& sub, SearchCommand& command) {
  sub.add_option("--world-size", command.world_size, "GPUs the job runs on")
      ->required()
      ->check(integer_in(1, std::int64_t{1} << 24));
  sub.add_option("--hf-config", command.hf_config,
                 "The model's Hugging Face config.json (else Megatron-LM's model arguments "
                 "describe it)")
      ->type_name("FILE");
  sub.add_option("--model", command.model, "The model's name in the jobs -o writes");
  add_gpu_memory_options(sub, command.gpu);
  const auto sizes = [&](const char* name, std::vector<std::int64_t>& into, const char* what) {
    sub.add_option(name, into, what)
        ->allow_extra_args(false)
        ->delimiter(',')
        ->type_name("N,...")
        ->check(integer_in(1, std::int64_t{1} << 24));
  };
  sizes("--tp", command.tp,
        "Tensor parallel sizes to try (default: every divisor of the world up to --gpus-per-node)");
  sizes("--pp", command.pp, "Pipeline parallel sizes to try");
  sizes("--vpp", command.vpp, "Virtual stages per pipeline rank to try");
  sizes("--cp", command.cp, "Context parallel sizes to try");
  sizes("--ep", command.ep, "Expert parallel sizes to try");
  sizes("--etp", command.etp, "Expert tensor parallel sizes to try (default: as --tp)");
  sub.add_option("--max-pp", command.max_pp, "The largest pipeline parallel size to try")
      ->check(integer_in(1, std::int64_t{1} << 24));
  sub.add_option("--fix", command.fix,
                 "Do not vary these (Megatron-LM's default unless ARGS set them): tp, pp, vpp, "
                 "cp, ep, etp, split, sequence-parallel, recompute")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->type_name("NAME,...");
  sub.add_option("--vary", command.vary,
                 "Also vary these, which the line's choice fixes by default: "
                 "distributed-optimizer (with and without --use-distributed-optimizer), "
                 "optimizer-instances (--num-distributed-optimizer-instances)")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->type_name("NAME,...");
  sub.add_option("--rank-by", command.rank_by,
                 "Order the launches that fit by: time (estimated step), memory (peak), "
                 "traffic (bytes sent per step), bubble")
      ->check(one_of({"time", "memory", "traffic", "bubble"}))
      ->capture_default_str();
  sub.add_option("--top", command.top, "Launches listed (and written by -o)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  sub.add_option("--link-gbps", command.link_gbps, "Gb/s per GPU between nodes")
      ->check(positive_number_up_to(1e6, "Gb/s"))
      ->capture_default_str();
  sub.add_option("--intra-node-gbps", command.intra_node_gbps, "Gb/s per GPU inside a node")
      ->check(positive_number_up_to(1e6, "Gb/s"))
      ->capture_default_str();
  sub.add_option("--gpus-per-node", command.gpus_per_node, "GPUs in a node")
      ->check(integer_in(1, 1 << 16))
      ->capture_default_str();
  sub.add_option("--gpu-tflops", command.gpu_tflops,
                 "Achieved dense TFLOP/s per GPU, for the compute and bubble estimate")
      ->check(positive_number_up_to(1e6, "TFLOP/s"))
      ->capture_default_str();
  sub.add_option("--threads", command.threads, "Threads that plan (default: every core)")
      ->check(integer_in(1, 1024));
  sub.add_flag("--json", command.json, "Every candidate and every refusal as JSON on stdout");
  sub.add_flag("--explain-rejected", command.explain_rejected,
               "Count the refused launches by reason");
  sub.add_option("-o,--output", command.output,
                 "Write the top launches as job directories DIR/1, DIR/2, ...")
      ->type_name("DIR");
  sub.add_flag("--replace", command.replace,
               "Replace DIR/N even when it holds files that are not a job's");
  sub.add_option("ARGS", command.args,
                 "Megatron-LM's training arguments that the launch fixes, after --")
      ->type_name("-- ARGS...");
  sub.footer(
      "Example:\n  paramlayout search --world-size 64 --hf-config llama3-70b.json "
      "--gpu-memory H100 -- \\\n    --bf16 --micro-batch-size 1 --global-batch-size 512 "
      "--seq-length 8192");
}

Result<ExitCode> run_search(const SearchCommand& command) {
  Result<SearchSpace> space = search_space(command);
  if (!space) return space.error();
  Result<std::optional<GpuBudget>> gpu = gpu_budget(command.gpu);
  if (!gpu) return gpu.error();
  std::optional<HfModel> hf;
  if (!command.hf_config.empty()) {
    Result<std::string> text = read_file(command.hf_config);
    if (!text) return text.error();
    Result<HfModel> model = read_hf_config(*text, command.hf_config);
    if (!model) return model.error();
    hf = std::move(*model);
  }
  LaunchRecord named;
  named.hf_config =
      command.hf_config.empty() ? std::nullopt : std::optional<std::string>(command.hf_config);
  if (!command.model.empty()) named.model = command.model;
  SearchRequest request;
  request.args = command.args;
  request.world_size = command.world_size;
  request.hf = hf ? &*hf : nullptr;
  request.files = [](const std::string& path) -> std::optional<std::string> {
    Result<std::string> text = read_file(path);
    return text ? std::optional<std::string>(std::move(*text)) : std::nullopt;
  };
  request.model_name = model_name(named);
  request.space = *space;
  request.links = {command.intra_node_gbps, command.link_gbps, command.gpus_per_node,
                   command.gpu_tflops};
  request.threads = command.threads > 0
                        ? command.threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  const bool show_progress = is_terminal(stderr);
  const auto started = std::chrono::steady_clock::now();
  const SearchProgress progress = [&](std::int64_t done, std::int64_t total) {
    if (!show_progress || std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
      return;
    }
    fmt::print(stderr, "\rparamlayout: search: {} of {} launch shapes planned", group_digits(done),
               group_digits(total));
    std::fflush(stderr);
  };
  Result<SearchResult> result = [&] {
    const InterruptStopsSearch interrupt;
    return search_launches(request, progress, &g_interrupted);
  }();
  if (show_progress && std::chrono::steady_clock::now() - started >= std::chrono::seconds(1)) {
    fmt::print(stderr, "\r\033[K");
  }
  if (!result) return result.error();
  const SearchBudget budget{gpu->has_value() ? std::optional((*gpu)->bytes) : std::nullopt,
                            gpu->has_value() ? (*gpu)->name : "", command.gpu.headroom_bytes()};
  const RankBy rank_by = parse_rank_by(command.rank_by).value_or(RankBy::time);
  rank_candidates(result->candidates, budget.gpu_bytes, budget.headroom, rank_by);
  if (result->interrupted) {
    fmt::print(stderr, "paramlayout: interrupted: what was planned so far is ranked below\n");
  }
  if (!command.output.empty()) {
    if (Result<void> written = write_candidate_jobs(command, request, result->candidates);
        !written) {
      return written.error();
    }
  }
  if (command.json) {
    fmt::print("{}\n", search_to_json(request, *result, budget, rank_by));
    return kExitOk;
  }
  std::size_t fitting = 0;
  for (const SearchCandidate& c : result->candidates) {
    fitting += budget.gpu_bytes && fits(c, *budget.gpu_bytes, budget.headroom);
  }
  fmt::print("{} on {} GPUs: {} launches Megatron-LM accepts ({} layouts planned)",
             request.model_name, group_digits(request.world_size),
             group_digits(static_cast<std::int64_t>(result->candidates.size())),
             group_digits(result->planned));
  if (budget.gpu_bytes) {
    fmt::print("; {} fit on {} with {} headroom", group_digits(static_cast<std::int64_t>(fitting)),
               budget.gpu_name.empty() ? bytes_text(*budget.gpu_bytes) : budget.gpu_name,
               bytes_text(budget.headroom));
  }
  fmt::print(
      "\n  ranked by {}{}; peak: the heaviest rank's, persistent exact, activations "
      "estimated\n",
      command.rank_by, budget.gpu_bytes ? ", those that fit first" : "");
  fmt::print(
      "  step: compute at {:g} TFLOP/s per GPU, traffic over {:g} Gb/s inside a node of {} "
      "and {:g} Gb/s between, the bubble; estimates (docs/search.md)\n",
      command.gpu_tflops, command.intra_node_gbps, command.gpus_per_node, command.link_gbps);
  fmt::print("  each row's second line: the arguments it adds to yours\n");
  print_candidates(result->candidates, command.top, budget);
  print_rejected(*result, command.explain_rejected);
  if (!command.output.empty()) {
    fmt::print("wrote the top {} launches' jobs to {}/1 ...\n",
               std::min(command.top, result->candidates.size()), command.output);
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
