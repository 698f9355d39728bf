#include "job_input.hpp"

#include <fmt/format.h>

#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

namespace fs = std::filesystem;

/// The first bytes of a file, enough to see its schema.
std::string head_of(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return {};
  std::string head(256, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), file));
  std::fclose(file);
  return head;
}

/// "stage0.chunk0: stage0.chunk0.layout.json is not the file job.json names (SHA-256 ...)".
std::string not_as_recorded(const JobRecordChunk& c, const std::string& file,
                            const std::string& recorded, const std::string& text) {
  const std::string actual = sha256_hex(text);
  if (recorded.empty() || actual == recorded) return {};
  return fmt::format("{}: {} is not the file job.json names (SHA-256 {}, job.json records {})",
                     c.name(), file, actual.substr(0, 12), recorded.substr(0, 12));
}

/// The config's copy job.json records, read and checked against the config's hash.
void read_config_copy(LoadedJob& job, std::uint64_t max_bytes) {
  if (!job.job.record.launch) return;
  for (const LaunchFile& f : job.job.record.launch->files) {
    if (f.copy.empty()) continue;
    Result<std::string> text = read_file((job.job.dir / f.copy).string(), max_bytes);
    if (!text) {
      job.not_as_recorded.push_back(fmt::format("{}: the copy of {} job.json records: {}", f.copy,
                                                excerpt(f.given), text.error().message));
    } else if (const std::string actual = sha256_hex(*text); actual != f.sha256) {
      job.not_as_recorded.push_back(
          fmt::format("{} is not the copy of {} job.json records (SHA-256 {}, job.json records {})",
                      f.copy, excerpt(f.given), actual.substr(0, 12), f.sha256.substr(0, 12)));
    } else {
      job.config_copy = std::move(*text);
    }
  }
}

}  // namespace

bool is_job_input(const std::string& path) {
  if (path == "-") return false;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  return fs::path(path).filename() == "job.json" || looks_like_job_json(head_of(path));
}

Result<JobInput> read_job_record(const std::string& path, std::uint64_t max_bytes) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path json = is_dir ? fs::path(path) / "job.json" : fs::path(path);
  if (is_dir && !fs::exists(json, ec)) {
    return Error{fmt::format("{}: not a job directory: it holds no job.json", excerpt(path))};
  }
  JobInput input;
  input.json_path = json.string();
  input.dir = json.has_parent_path() ? json.parent_path() : fs::path(".");
  Result<std::string> text = read_file(input.json_path, max_bytes);
  if (!text) return text.error();
  Result<JobRecord> record = parse_job_json(*text, input.json_path);
  if (!record) return record.error();
  input.record = std::move(*record);
  return input;
}

Result<LoadedJob> load_job(const std::string& path, std::uint64_t max_bytes) {
  Result<JobInput> input = read_job_record(path, max_bytes);
  if (!input) return input.error();
  LoadedJob job{std::move(*input), {}, {}, {}};
  job.chunks.reserve(job.job.record.chunks.size());
  for (const JobRecordChunk& c : job.job.record.chunks) {
    JobChunkInput& chunk = job.chunks.emplace_back();
    chunk.record = &c;
    const std::string manifest_path = (job.job.dir / c.manifest).string();
    const std::string layout_path = (job.job.dir / c.layout).string();
    Result<std::string> manifest = read_file(manifest_path, max_bytes);
    if (!manifest) return Error{c.name() + ": " + manifest.error().message};
    Result<std::string> layout = read_file(layout_path, max_bytes);
    if (!layout) return Error{c.name() + ": " + layout.error().message};
    chunk.manifest_text = std::move(*manifest);
    chunk.layout_text = std::move(*layout);
    for (const std::string& problem :
         {not_as_recorded(c, c.manifest, c.manifest_sha256, chunk.manifest_text),
          not_as_recorded(c, c.layout, c.layout_sha256, chunk.layout_text)}) {
      if (!problem.empty()) job.not_as_recorded.push_back(problem);
    }
    Result<Manifest> parsed_manifest = parse_manifest(chunk.manifest_text, manifest_path);
    if (!parsed_manifest) return Error{c.name() + ": " + parsed_manifest.error().message};
    Result<Layout> parsed_layout = parse_layout(chunk.layout_text, layout_path);
    if (!parsed_layout) return Error{c.name() + ": " + parsed_layout.error().message};
    chunk.manifest = std::move(*parsed_manifest);
    chunk.layout = std::move(*parsed_layout);
  }
  read_config_copy(job, max_bytes);
  return job;
}

Result<void> require_as_recorded(const LoadedJob& job) {
  if (job.not_as_recorded.empty()) return {};
  return Error{fmt::format(
      "{}: its files are not the ones it names ({} file{}); `paramlayout "
      "check {}` says more:\n  {}",
      job.job.json_path, job.not_as_recorded.size(), job.not_as_recorded.size() == 1 ? "" : "s",
      job.job.json_path, fmt::join(job.not_as_recorded, "\n  "))};
}

}  // namespace paramlayout::cli
