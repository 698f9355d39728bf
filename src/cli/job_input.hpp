// A job directory as an input: job.json and each chunk's manifest and layout beside it, every
// file checked against the SHA-256 job.json records.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::cli {

/// True when `path` names a job: a directory, or a file whose text is a job.json. Commands
/// that take a layout take a job in its place.
bool is_job_input(const std::string& path);

/// job.json read: where it is and what it says.
struct JobInput {
  std::string json_path;      ///< as messages name it
  std::filesystem::path dir;  ///< the directory its file names are relative to
  JobRecord record;
};

/// Reads job.json from `path`: the job directory or the file itself.
Result<JobInput> read_job_record(const std::string& path, std::uint64_t max_bytes);

/// One chunk read back.
struct JobChunkInput {
  const JobRecordChunk* record = nullptr;  ///< in JobInput::record
  std::string manifest_text;
  std::string layout_text;
  Manifest manifest;
  Layout layout;
};

/// A whole job read back.
struct LoadedJob {
  JobInput job;
  std::vector<JobChunkInput> chunks;  ///< as job.json lists them
  /// "stage1.chunk0: stage1.chunk0.layout.json is not the file job.json names (...)": each
  /// chunk file whose bytes are not the ones job.json records, and the config's copy.
  std::vector<std::string> not_as_recorded;
  /// The config as the job was planned: its copy's bytes, when job.json records one and the
  /// copy is as recorded.
  std::optional<std::string> config_copy;
};

/// Reads job.json, every chunk's manifest and layout and the config's copy; a chunk file that
/// cannot be read or parsed is an error naming the chunk; a file whose hash differs, or a
/// copy that is gone, is listed in not_as_recorded.
Result<LoadedJob> load_job(const std::string& path, std::uint64_t max_bytes);

/// The error for a job whose files are not the ones job.json names, for the commands that
/// only read a job (check reports them as broken instead).
Result<void> require_as_recorded(const LoadedJob& job);

}  // namespace paramlayout::cli
