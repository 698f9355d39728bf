// paramlayout job: a Megatron-LM launch line on N GPUs -> every stage's and chunk's manifest
// and layout, job.json, and the memory each stage needs per rank.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "flags.hpp"
#include "io.hpp"
#include "job_directory.hpp"
#include "job_input.hpp"
#include "job_table.hpp"
#include "launch.hpp"
#include "memory_table.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/text.hpp"

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
    return Error{
        "--from replays the launch job.json records: give no --world-size, "
        "--hf-config, --model or arguments with it"};
  }
  Result<JobInput> job = read_job_record(c.from, kDefaultMaxInputBytes);
  if (!job) return job.error();
  if (!job->record.launch) {
    return Error{fmt::format("{}: records no launch to replay (written by {})", job->json_path,
                             job->record.generator)};
  }
  return LaunchInput{*job->record.launch, job->dir, job->record.generator};
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

/// The figures of the job's table, from the plan's own.
Result<JobStats> plan_stats(const JobRecord& record, const JobPlan& plan) {
  std::vector<LayoutStats> chunk_stats;
  chunk_stats.reserve(plan.chunks.size());
  for (const JobChunk& c : plan.chunks) chunk_stats.push_back(c.stats);
  return job_stats(record, std::move(chunk_stats));
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
  add_gpu_memory_options(sub, command.gpu);
  sub.add_flag("-q,--quiet", command.quiet, "No summary");
  sub.add_option("ARGS", command.args,
                 "Megatron-LM's training arguments, after --, as in the launch script")
      ->type_name("-- ARGS...");
  sub.footer(
      "Example:\n  paramlayout job --world-size 64 -o job/ -- --num-layers 32 "
      "--hidden-size 4096 \\\n    --num-attention-heads 32 --seq-length 4096 "
      "--max-position-embeddings 4096 --vocab-size 128256 \\\n"
      "    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --bf16 "
      "--use-distributed-optimizer");
}

Result<ExitCode> run_job(const JobCommand& command) {
  Result<LaunchInput> input = launch_input(command);
  if (!input) return input.error();
  Result<std::optional<GpuBudget>> gpu = gpu_budget(command.gpu);
  if (!gpu) return gpu.error();
  Result<PlannedLaunch> planned = plan_launch(input->launch, input->recorded_in);
  if (!planned) return planned.error();
  const JobSpec& job = planned->spec;
  const JobPlan& plan = planned->plan;
  if (input->recorded_in) {
    for (const std::string& change : changed_files(input->launch, planned->files)) {
      print_note(change);
    }
  }
  // The table's figures before any file is written: a job is written whole with its summary.
  const JobRecord record = job_record(job, plan, std::nullopt, {});
  Result<JobStats> stats = plan_stats(record, plan);
  if (!stats) return stats.error();
  Result<std::vector<RankMemory>> memory = rank_memory(job, plan);
  if (!memory) return memory.error();
  const std::vector<JobFile> kept = planned->kept_files();
  if (!command.output.empty()) {
    const LaunchRecord launch = record_launch(input->launch, planned->files, command.output);
    if (Result<void> written = write_job_directory(
            command.output, job_files(job, plan, launch, kept), command.replace);
        !written) {
      return written.error();
    }
  }
  if (!command.quiet) {
    const DType grad = job.grad_reduce_in_fp32 ? DType::float32 : job.param_dtype;
    print_job_header(
        stdout, record,
        {.experts = job.model.moe.num_experts > 0,
         .expert_buffers = has_expert_buffers(plan),
         .optimizer_state = describe_optimizer_state(job.optimizer, job.param_dtype, grad)});
    print_job_table(stdout, record, *stats);
    print_memory_table(stdout, describe_activation_inputs(job), *memory, *gpu,
                       command.gpu.headroom_bytes());
    if (!command.output.empty()) {
      fmt::print("wrote {} files to {}: job.json, each stageS.chunkC's manifest and layout{}\n",
                 2 * plan.chunks.size() + kept.size() + 1, command.output,
                 kept.empty() ? "" : fmt::format(" and the config's copy ({})", kConfigCopy));
    }
  }
  return kExitOk;
}

}  // namespace paramlayout::cli
