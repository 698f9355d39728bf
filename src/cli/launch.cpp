#include "launch.hpp"

#include <fmt/format.h>

#include "io.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

namespace fs = std::filesystem;

/// Where a file the launch names is read: as given, or at its recorded path.
class FileLocator {
 public:
  FileLocator(const LaunchRecord& launch, const std::optional<fs::path>& recorded_in)
      : launch_(launch), recorded_in_(recorded_in) {}

  /// nullopt: the record does not list it (a replay reads only what the launch read).
  std::optional<fs::path> locate(const std::string& given) const {
    if (!recorded_in_) return fs::path(given);
    for (const LaunchFile& f : launch_.files) {
      if (f.given == given) return (*recorded_in_ / f.path).lexically_normal();
    }
    return std::nullopt;
  }

 private:
  const LaunchRecord& launch_;
  const std::optional<fs::path>& recorded_in_;
};

}  // namespace

std::string model_name(const LaunchRecord& launch) {
  if (launch.model) return *launch.model;
  if (!launch.hf_config) return "model";
  const fs::path path(*launch.hf_config);
  return path.filename() == "config.json" && path.has_parent_path()
             ? path.parent_path().filename().string()
             : path.stem().string();
}

Result<PlannedLaunch> plan_launch(const LaunchRecord& launch,
                                  const std::optional<fs::path>& recorded_in) {
  const FileLocator locator(launch, recorded_in);
  std::vector<FileRead> files;
  std::optional<HfModel> hf;
  std::optional<std::string> hf_text;
  if (launch.hf_config) {
    const std::optional<fs::path> at = locator.locate(*launch.hf_config);
    if (!at) {
      return Error{
          fmt::format("job.json's launch names the config {} but does not list it in "
                      "its files",
                      excerpt(*launch.hf_config))};
    }
    Result<std::string> text = read_file(at->string());
    if (!text) return text.error();
    files.push_back({*launch.hf_config, *at, sha256_hex(*text)});
    Result<HfModel> model = read_hf_config(*text, at->string());
    if (!model) return model.error();
    hf = std::move(*model);
    hf_text = std::move(*text);
  }
  const FileReader reader = [&](const std::string& given) -> std::optional<std::string> {
    const std::optional<fs::path> at = locator.locate(given);
    std::error_code ec;
    if (!at || !fs::is_regular_file(*at, ec)) return std::nullopt;
    Result<std::string> text = read_file(at->string());
    if (!text) return std::nullopt;
    files.push_back({given, *at, sha256_hex(*text)});
    return std::move(*text);
  };
  Result<JobSpec> spec =
      job_from_megatron_args(launch.args, launch.world_size, hf ? &*hf : nullptr, reader);
  if (!spec) return spec.error();
  spec->model_name = model_name(launch);
  if (std::optional<Packer> packer = parse_packer(launch.packer)) {
    spec->packer = *packer;
  } else {
    return Error{
        fmt::format("job.json's launch: packer: expected \"megatron\" or \"balanced\", "
                    "got \"{}\"",
                    excerpt(launch.packer))};
  }
  Result<JobPlan> plan = plan_job(*spec);
  if (!plan) return plan.error();
  return PlannedLaunch{std::move(*spec), std::move(*plan), std::move(files), std::move(hf_text)};
}

std::vector<JobFile> PlannedLaunch::kept_files() const {
  if (!hf_config_text) return {};
  return {{std::string(kConfigCopy), *hf_config_text}};
}

LaunchRecord record_launch(LaunchRecord launch, const std::vector<FileRead>& files,
                           const fs::path& dir) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  launch.files.clear();
  for (const FileRead& f : files) {
    const fs::path at = fs::weakly_canonical(fs::absolute(f.location, ec), ec);
    const fs::path relative = at.lexically_relative(base);
    const bool config = launch.hf_config && f.given == *launch.hf_config;
    launch.files.push_back({f.given,
                            relative.empty() ? at.generic_string() : relative.generic_string(),
                            f.sha256, config ? std::string(kConfigCopy) : std::string()});
  }
  return launch;
}

std::vector<std::string> changed_files(const LaunchRecord& recorded,
                                       const std::vector<FileRead>& files) {
  std::vector<std::string> changed;
  for (const LaunchFile& r : recorded.files) {
    const FileRead* now = nullptr;
    for (const FileRead& f : files) {
      if (f.given == r.given) now = &f;
    }
    if (now == nullptr) {
      changed.push_back(
          fmt::format("{} ({}), which the job read, is gone", excerpt(r.given), excerpt(r.path)));
    } else if (now->sha256 != r.sha256) {
      changed.push_back(fmt::format(
          "{} changed since the job was planned (SHA-256 {} then, {} now)",
          excerpt(now->location.string()), r.sha256.substr(0, 12), now->sha256.substr(0, 12)));
    }
  }
  return changed;
}

}  // namespace paramlayout::cli
