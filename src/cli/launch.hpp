// A Megatron-LM launch on N GPUs, planned: from the command line, or replayed from the launch
// a job.json records (`job --from`, `check --replan`).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/job_record.hpp"

namespace paramlayout::cli {

/// A file the launch read: where it was, and its SHA-256 now.
struct FileRead {
  std::string given;               ///< as the launch names it
  std::filesystem::path location;  ///< where it was read
  std::string sha256;
};

/// A planned launch and the files it read.
struct PlannedLaunch {
  JobSpec spec;
  JobPlan plan;
  std::vector<FileRead> files;
  std::optional<std::string> hf_config_text;  ///< the config's bytes, when the launch has one

  /// The copies a job directory keeps of what the launch read (the config, as kConfigCopy).
  std::vector<JobFile> kept_files() const;
};

/// The model's name: --model, else the config's folder or file name, else "model".
std::string model_name(const LaunchRecord& launch);

/// Plans `launch`. Without `recorded_in`, its files are read where the launch names them
/// (relative to the working directory); with it, only the files the record lists are read,
/// at their recorded paths relative to that directory (job.json's).
Result<PlannedLaunch> plan_launch(const LaunchRecord& launch,
                                  const std::optional<std::filesystem::path>& recorded_in);

/// The launch as job.json in `dir` records it: `launch` with each file read, its path
/// relative to `dir`, and the config's copy named.
LaunchRecord record_launch(LaunchRecord launch, const std::vector<FileRead>& files,
                           const std::filesystem::path& dir);

/// "config.json changed since the job was planned" for each recorded file whose bytes now
/// differ (or that is gone), in the record's order.
std::vector<std::string> changed_files(const LaunchRecord& recorded,
                                       const std::vector<FileRead>& files);

}  // namespace paramlayout::cli
