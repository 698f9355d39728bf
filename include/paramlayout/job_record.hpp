// job.json (paramlayout.job/v1): what a job directory holds, as the job command writes it and
// every command that takes a job reads it back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/rank_memory.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// A file the launch read (the Hugging Face config, a tokenizer file).
struct LaunchFile {
  std::string given;   ///< the path as the launch gave it (--hf-config, an argument's value)
  std::string path;    ///< where it is, relative to job.json's directory
  std::string sha256;  ///< of its bytes when the job was planned, lowercase hex
  /// kConfigCopy when the job directory keeps a copy of it (the config), else "".
  std::string copy;
  bool operator==(const LaunchFile&) const = default;
};

/// The name of the config's copy in a job directory: its bytes as the job was planned, so
/// that a diff compares the config field by field even after it was edited in place.
inline constexpr std::string_view kConfigCopy = "hf_config.json";

/// How the job was launched: enough to plan it again (`job --from`, `check --replan`).
struct LaunchRecord {
  std::int64_t world_size = 1;
  std::vector<std::string> args;         ///< Megatron-LM's arguments, exactly as given
  std::optional<std::string> hf_config;  ///< `given` of the --hf-config file in `files`
  std::vector<LaunchFile> files;         ///< every file the launch read, in reading order
  std::string packer = "megatron";
  std::optional<std::string> model;  ///< --model, when given
  bool operator==(const LaunchRecord&) const = default;
};

/// One chunk as job.json lists it.
struct JobRecordChunk {
  std::int64_t stage = 0;
  std::int64_t chunk = 0;
  std::vector<std::int64_t> layers;
  std::vector<std::int64_t> mtp_layers;
  bool embedding = false;  ///< it holds the word embeddings
  bool output = false;     ///< it computes the output and the loss
  std::optional<std::int64_t> bucket_size;
  std::string manifest;         ///< file name beside job.json
  std::string layout;           ///< file name beside job.json
  std::string manifest_sha256;  ///< "" when job.json does not record it
  std::string layout_sha256;    ///< "" when job.json does not record it
  std::int64_t param_elements = 0;
  BytesPerRank bytes_per_rank;
  bool operator==(const JobRecordChunk&) const = default;

  /// `stageS.chunkC`, as messages name the chunk.
  std::string name() const;
};

/// The whole of job.json.
struct JobRecord {
  std::string generator;  ///< the paramlayout that wrote it
  std::string model;
  std::int64_t world_size = 1;
  ParallelConfig parallel;  ///< tp, pp, vpp, cp, ep, etp
  std::int64_t dp = 1;
  std::int64_t expert_dp = 1;
  Strategy strategy = Strategy::unpadded;
  Packer packer = Packer::megatron;
  DType param_dtype = DType::float32;
  DType grad_dtype = DType::float32;
  std::int64_t dense_shards = 1;
  std::int64_t expert_shards = 1;
  /// The optimizer state's bytes per element, for people ("" when job.json does not say).
  std::string optimizer_state;
  std::vector<std::string> ignored_arguments;
  std::vector<std::string> notes;
  std::vector<JobRecordChunk> chunks;  ///< stage-major
  std::int64_t heaviest_stage = 0;
  BytesPerRank heaviest_stage_bytes;
  std::string memory_inputs;           ///< what the activations are estimated for; "" for none
  std::vector<RankMemory> memory;      ///< each stage's rank memory, in order (none: not recorded)
  std::optional<LaunchRecord> launch;  ///< absent in a job.json that does not record it
  bool operator==(const JobRecord&) const = default;
};

/// A file of a job directory: its name beside job.json and its bytes.
struct JobFile {
  std::string name;
  std::string content;
};

/// Every file of a planned job's directory: each chunk's manifest and layout, `kept` (copies
/// of files the launch read, as they are: the config), then job.json, which records the
/// chunk files' SHA-256 and, when given, the launch.
std::vector<JobFile> job_files(const JobSpec& job, const JobPlan& plan,
                               const std::optional<LaunchRecord>& launch,
                               std::vector<JobFile> kept = {});

/// What job.json says of `plan`, its chunk files' hashes taken from `files` (by name).
JobRecord job_record(const JobSpec& job, const JobPlan& plan,
                     const std::optional<LaunchRecord>& launch, const std::vector<JobFile>& files);

/// job.json's text: one line per chunk, so a diff of two jobs reads well.
std::string write_job_json(const JobRecord& record);

/// Reads job.json; `source` names it in errors. Chunks must be stage-major and each
/// (stage, chunk) of pp x vpp listed once.
Result<JobRecord> parse_job_json(std::string_view text, std::string_view source);

/// True when `text` looks like job.json (its `schema` names paramlayout.job), so commands
/// that take a layout can take a job instead.
bool looks_like_job_json(std::string_view text);

}  // namespace paramlayout
