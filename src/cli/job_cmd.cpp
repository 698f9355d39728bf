// paramlayout job: a Megatron-LM launch line on N GPUs -> every stage's and chunk's manifest
// and layout, job.json, and the memory each stage needs per rank.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "flags.hpp"
#include "io.hpp"
#include "job_directory.hpp"
#include "job_input.hpp"
#include "launch.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/text.hpp"
#include "summary.hpp"

namespace paramlayout::cli {
namespace {

/// The launch the command line gives, or the one `--from` names (and the directory its
/// file paths are relative to).
struct LaunchInput {
  LaunchRecord launch;
  std::optional<std::filesystem::path> recorded_in;
  std::string recorded_generator;  ///< the paramlayout that wrote --from's job.json
};

Result<LaunchInput> launch_input(const JobCommand& c) {
  if (c.from.empty()) {
    if (c.world_size == 0) return Error{"--world-size is required (or --from JOB to replay one)"};
    LaunchRecord launch;
    launch.world_size = c.world_size;
    launch.args = c.args;
    if (!c.hf_config.empty()) launch.hf_config = c.hf_config;
    launch.packer = c.packer;
    if (!c.model.empty()) launch.model = c.model;
    return LaunchInput{std::move(launch), std::nullopt, {}};
  }
  if (c.world_size != 0 || !c.hf_config.empty() || !c.args.empty() || !c.model.empty()) {
    return Error{"--from replays the launch job.json records: give no --world-size, "
                 "--hf-config, --model or arguments with it"};
  }
  Result<JobInput> job = read_job_record(c.from, kDefaultMaxInputBytes);
  if (!job) return job.error();
  if (!job->record.launch) {
    return Error{fmt::format("{}: records no launch to replay (written by {})",
                             job->json_path, job->record.generator)};
  }
  return LaunchInput{*job->record.launch, job->dir, job->record.generator};
}

/// "E 0-2", "33-34", "59-60 mtp 0 L": what a chunk builds.
std::string describe_chunk(const ChunkPlacement& p) {
  std::vector<std::string> parts;
  if (p.pre_process) parts.emplace_back("E");
  if (p.layers.size() == 1) parts.push_back(fmt::format("{}", p.layers.front()));
  if (p.layers.size() > 1) parts.push_back(fmt::format("{}-{}", p.layers.front(), p.layers.back()));
  if (!p.mtp_layers.empty()) {
    parts.push_back(p.mtp_layers.size() == 1
                        ? fmt::format("mtp {}", p.mtp_layers.front())
                        : fmt::format("mtp {}-{}", p.mtp_layers.front(), p.mtp_layers.back()));
  }
  if (p.post_process) parts.emplace_back("L");
  return parts.empty() ? std::string("-") : fmt::format("{}", fmt::join(parts, " "));
}

/// Whether any chunk has a buffer of expert-parallel params.
bool has_expert_buffers(const JobPlan& plan) {
  for (const JobChunk& c : plan.chunks) {
    for (const BufferLayout& b : c.layout.buffers) {
      if (b.key.expert_parallel) return true;
    }
  }
  return false;
}

void print_header(std::FILE* out, const JobSpec& job, const JobPlan& plan) {
  const ParallelConfig& p = job.parallel;
  fmt::print(out, "{}: {} GPUs = tp {} x pp {} x cp {} x dp {}", job.model_name,
             group_digits(job.world_size), p.tp, p.pp, p.cp, job.dp);
  if (job.model.moe.num_experts > 0) {
    fmt::print(out, "; experts: ep {} x etp {} x expert dp {}", p.ep, p.etp, job.expert_dp);
  }
  if (p.vpp > 1) fmt::print(out, "; {} virtual chunks per stage", p.vpp);
  const DType grad = job.grad_reduce_in_fp32 ? DType::float32 : job.param_dtype;
  fmt::print(out, "\n  {}, {} params, {} grads; ", to_string(job.strategy),
             to_string(job.param_dtype), to_string(grad));
  const bool experts = has_expert_buffers(plan);
  if (job.strategy == Strategy::unpadded) {
    // Without the distributed optimizer every rank keeps whole buffers and all-reduces them.
    fmt::print(out, "buffers not sharded (no distributed optimizer), grads all-reduced over "
                    "{} ranks", job.dp * job.parallel.cp);
    if (experts) fmt::print(out, " (expert grads over {})", job.expert_dp);
  } else {
    fmt::print(out, "buffers sharded over {} ranks", job.dense_shards());
    if (experts) fmt::print(out, " (expert buffers over {})", job.expert_shards());
  }
  fmt::print(out, "\n  optimizer state: {}\n",
             describe_optimizer_state(job.optimizer, job.param_dtype, grad));
  for (const std::string& note : job.notes) fmt::print(out, "  note: {}\n", note);
  if (!job.ignored_arguments.empty()) {
    constexpr std::size_t kShown = 6;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < job.ignored_arguments.size() && i < kShown; ++i) {
      const std::string& a = job.ignored_arguments[i];
      names.push_back(a.substr(0, a.find(' ')));
    }
    const std::size_t more = job.ignored_arguments.size() - names.size();
    fmt::print(out, "  ignored {} arguments that do not change the layout: {}{}\n",
               job.ignored_arguments.size(), fmt::join(names, ", "),
               more > 0 ? fmt::format(" and {} more (job.json lists them)", more) : "");
  }
}

void print_table(std::FILE* out, const JobSpec& job, const JobPlan& plan) {
  constexpr const char* kRow = "  {:>5} {:>5}  {:<16} {:>17} {:>8} {:>11} {:>11} {:>11} {:>11}\n";
  fmt::print(out, "\n");
  fmt::print(out, kRow, "stage", "chunk", "builds", "param elements", "padding", "params/rank",
             "grads/rank", "optim/rank", "total/rank");
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) {
    for (const JobChunk& c : plan.chunks) {
      if (c.placement.stage != stage) continue;
      const BytesPerRank& b = c.stats.bytes_per_rank;
      fmt::print(out, kRow, stage, c.placement.chunk, describe_chunk(c.placement),
                 group_digits(c.param_elements),
                 fmt::format("{:.2f}%", c.stats.padding_percent()), human_bytes(b.params),
                 human_bytes(b.grads), human_bytes(b.optimizer), human_bytes(b.total()));
    }
    if (job.parallel.vpp > 1) {
      const BytesPerRank m = stage_memory(plan, stage).value_or(BytesPerRank{});
      fmt::print(out, kRow, stage, "all", "", "", "", human_bytes(m.params), human_bytes(m.grads),
                 human_bytes(m.optimizer), human_bytes(m.total()));
    }
  }
  const BytesPerRank heaviest = stage_memory(plan, plan.heaviest_stage).value_or(BytesPerRank{});
  fmt::print(out, "  heaviest stage: {}, {} per rank (params {}, grads {}, optimizer state {})\n",
             plan.heaviest_stage, human_bytes(heaviest.total()), human_bytes(heaviest.params),
             human_bytes(heaviest.grads), human_bytes(heaviest.optimizer));
  std::vector<StageTraffic> traffic;
  for (const JobChunk& c : plan.chunks) traffic.push_back({c.placement.stage, &c.stats.traffic});
  print_busiest_stage(out, traffic);
}

}  // namespace

void setup_job(CLI::App& sub, JobCommand& command) {
  sub.add_option("--world-size", command.world_size, "GPUs the job runs on")
      ->check(integer_in(1, std::int64_t{1} << 24));
  sub.add_option("--hf-config", command.hf_config,
                 "The model's Hugging Face config.json (else Megatron-LM's model arguments "
                 "describe it)")
      ->type_name("FILE");
  sub.add_option("-o,--output", command.output,
                 "Write stageS.chunkC.{manifest,layout}.json and job.json into this directory "
                 "(without it, only the summary)")
      ->type_name("DIR");
  sub.add_flag("--replace", command.replace,
               "Replace DIR even when it holds files that are not a job's (deleted with it)");
  sub.add_option("--packer", command.packer,
                 "Layerwise packing: megatron (Megatron-LM's, bit-exact) or balanced")
      ->type_name("NAME")
      ->check(one_of({"megatron", "balanced"}))
      ->capture_default_str();
  sub.add_option("--model", command.model, "The model's name in the manifests");
  sub.add_option("--from", command.from,
                 "Plan again the launch an earlier job recorded (its directory or job.json), "
                 "with the files it read as they are now")
      ->type_name("JOB");
  sub.add_flag("-q,--quiet", command.quiet, "No summary");
  sub.add_option("ARGS", command.args,
                 "Megatron-LM's training arguments, after --, as in the launch script")
      ->type_name("-- ARGS...");
  sub.footer("Example:\n  paramlayout job --world-size 64 -o job/ -- --num-layers 32 "
             "--hidden-size 4096 \\\n    --num-attention-heads 32 --seq-length 4096 "
             "--max-position-embeddings 4096 --vocab-size 128256 \\\n"
             "    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --bf16 "
             "--use-distributed-optimizer");
}

Result<ExitCode> run_job(const JobCommand& command) {
  Result<LaunchInput> input = launch_input(command);
  if (!input) return input.error();
  Result<PlannedLaunch> planned = plan_launch(input->launch, input->recorded_in);
  if (!planned) return planned.error();
  const JobSpec& job = planned->spec;
  const JobPlan& plan = planned->plan;
  if (input->recorded_in) {
    for (const std::string& change : changed_files(input->launch, planned->files)) {
      fmt::print(stderr, "paramlayout: note: {}\n", change);
    }
  }
  if (!command.output.empty()) {
    const LaunchRecord launch = record_launch(input->launch, planned->files, command.output);
    if (Result<void> written =
            write_job_directory(command.output, job_files(job, plan, launch), command.replace);
        !written) {
      return written.error();
    }
  }
  if (!command.quiet) {
    print_header(stdout, job, plan);
    print_table(stdout, job, plan);
    if (!command.output.empty()) {
      fmt::print("wrote {} files to {}: job.json and each stageS.chunkC's manifest and layout\n",
                 2 * plan.chunks.size() + 1, command.output);
    }
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
