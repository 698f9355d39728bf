// The subcommands: each has an options struct, a setup function that declares its flags
// on its CLI11 subcommand, and a run function that returns the process exit code, or the
// Error that stopped it (main prints it once and exits 2). main.cpp lists them in one table.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io.hpp"
#include "memory_table.hpp"
#include "paramlayout/error.hpp"

namespace paramlayout::cli {

/// Process exit codes (docs/cli.md, Conventions).
enum ExitCode : int {
  kExitOk = 0,        ///< success; the layout holds; no difference
  kExitWrong = 1,     ///< the layout is wrong or differs
  kExitBadInput = 2,  ///< bad usage or bad input
};

struct PlanCommand {
  std::vector<std::string> manifests;  ///< one per model chunk (pipeline stage)
  std::string strategy = "sequential-dp";
  std::int64_t dp = 0;
  std::int64_t expert_dp = 0;  ///< 0: same as dp
  std::string bucket_size;     ///< "" for Megatron's default, "none", or a count
  bool grad_reduce_in_fp32 = false;
  bool pad_for_high_nccl_busbw = false;
  std::string packer = "megatron";
  std::string output;  ///< "" for stdout
  bool quiet = false;
  bool timings = false;
  double link_gbps = 0;                             ///< 0: no time estimate
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_plan(CLI::App& sub, PlanCommand& command);
Result<ExitCode> run_plan(const PlanCommand& command);

struct CheckCommand {
  std::string layout;
  std::string manifest;
  bool replan = false;
  std::vector<std::string> against_log;  ///< --against-log: Megatron-LM logs ("-": stdin)
  std::size_t limit = 0;                 ///< 0: print every broken promise
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_check(CLI::App& sub, CheckCommand& command);
Result<ExitCode> run_check(const CheckCommand& command);

/// The most elements verify moves by default: far above one model chunk's buffers.
inline constexpr std::int64_t kDefaultMaxVerifyElements = std::int64_t{1} << 40;

struct VerifyCommand {
  std::string layout;                 ///< a layout, or a job (its directory or job.json)
  std::string manifest;               ///< a layout's; "" with a job
  std::optional<std::int64_t> stage;  ///< a job's chunks of this stage only
  std::optional<std::int64_t> chunk;  ///< a job's chunk C of each stage only
  std::string backend = "auto";
  int gpus = 0;
  std::string report;
  double timeout = 300;
  std::int64_t chunk_elements = 0;
  std::int64_t max_elements = kDefaultMaxVerifyElements;
  bool quiet = false;
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_verify(CLI::App& sub, VerifyCommand& command);
Result<ExitCode> run_verify(const VerifyCommand& command);

struct DiffCommand {
  std::string old_layout;
  std::string new_layout;
  bool json = false;
  std::size_t limit = 20;
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_diff(CLI::App& sub, DiffCommand& command);
Result<ExitCode> run_diff(const DiffCommand& command);

struct RenderCommand {
  std::string layout;
  std::string output;                               ///< "" for stdout
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_render(CLI::App& sub, RenderCommand& command);
Result<ExitCode> run_render(const RenderCommand& command);

struct StatsCommand {
  std::string layout;
  std::string manifest;
  bool json = false;
  double link_gbps = 0;                             ///< 0: no time estimate
  GpuMemoryOptions gpu;                             ///< --gpu-memory, --headroom (a job's)
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_stats(CLI::App& sub, StatsCommand& command);
Result<ExitCode> run_stats(const StatsCommand& command);

struct SynthCommand {
  std::string config;
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t stage = 0;
  std::int64_t ep = 1;
  std::int64_t etp = 0;  ///< 0: same as tp
  std::int64_t vocab_divisible_by = 128;
  std::string dtype = "bfloat16";
  std::string model;   ///< "" for a name made from the config's path and the splits
  std::string output;  ///< "" for stdout
  bool quiet = false;
  bool list = false;                                ///< print the architectures and stop
  std::uint64_t max_input = kDefaultMaxInputBytes;  ///< --max-input-size
};
void setup_synth(CLI::App& sub, SynthCommand& command);
Result<ExitCode> run_synth(const SynthCommand& command);

struct JobCommand {
  std::int64_t world_size = 0;  ///< 0: not given
  std::string from;             ///< "" or an earlier job whose launch is replayed
  std::string hf_config;        ///< "" when the model arguments describe the model
  std::string output;           ///< "" for the summary only
  bool replace = false;         ///< replace `output` even when it holds files not a job's
  std::string packer = "megatron";
  std::string model;  ///< "" for a name from the config's path
  bool quiet = false;
  GpuMemoryOptions gpu;           ///< --gpu-memory, --headroom
  std::vector<std::string> args;  ///< Megatron-LM's arguments
};
void setup_job(CLI::App& sub, JobCommand& command);
Result<ExitCode> run_job(const JobCommand& command);

struct SearchCommand {
  std::int64_t world_size = 0;
  std::string hf_config;  ///< "" when the model arguments describe the model
  std::string model;      ///< "" for a name from the config's path
  GpuMemoryOptions gpu;   ///< --gpu-memory, --headroom
  std::vector<std::int64_t> tp, pp, vpp, cp, ep, etp;  ///< empty: every size the world allows
  std::int64_t max_pp = 0;
  std::vector<std::string> fix;   ///< dimensions not varied
  std::vector<std::string> vary;  ///< dimensions fixed by default, to vary
  std::string rank_by = "time";
  std::size_t top = 10;
  double link_gbps = 400;
  double intra_node_gbps = 3600;
  std::int64_t gpus_per_node = 8;
  double gpu_tflops = 400;
  int threads = 0;  ///< 0: every core
  bool json = false;
  bool explain_rejected = false;
  std::string output;  ///< "" or a directory for the top candidates' jobs
  bool replace = false;
  std::vector<std::string> args;  ///< Megatron-LM's arguments the user fixes
};
void setup_search(CLI::App& sub, SearchCommand& command);
Result<ExitCode> run_search(const SearchCommand& command);

}  // namespace paramlayout::cli
