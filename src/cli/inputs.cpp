#include "inputs.hpp"

#include <fmt/format.h>

#include "flags.hpp"
#include "paramlayout/layout_json.hpp"

namespace paramlayout::cli {

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

Result<Manifest> load_manifest(const std::string& path, std::uint64_t max_bytes) {
  Result<std::string> text = read_file(path, max_bytes);
  if (!text) return text.error();
  return parse_manifest(*text, display_name(path));
}

Result<Layout> load_layout(const std::string& path, std::uint64_t max_bytes) {
  Result<std::string> text = read_file(path, max_bytes);
  if (!text) return text.error();
  return parse_layout(*text, display_name(path));
}

Result<LayoutWithManifest> load_layout_with_manifest(const std::string& layout_path,
                                                     const std::string& manifest_path,
                                                     std::uint64_t max_bytes) {
  Result<Manifest> manifest = load_manifest(manifest_path, max_bytes);
  if (!manifest) return manifest.error();
  Result<Layout> layout = load_layout(layout_path, max_bytes);
  if (!layout) return layout.error();
  return LayoutWithManifest{std::move(*manifest), std::move(*layout)};
}

void add_layout_with_manifest(CLI::App& sub, std::string& layout_path, std::string& manifest_path,
                              const std::string& manifest_help) {
  sub.add_option("LAYOUT", layout_path, "Layout v1 JSON file")->type_name("FILE")->required();
  sub.add_option("--manifest", manifest_path, manifest_help)->type_name("FILE")->required();
}

void add_layout_or_job(CLI::App& sub, std::string& layout_path, std::string& manifest_path) {
  sub.add_option("LAYOUT", layout_path,
                 "Layout v1 JSON file, or a job: its directory or its job.json")
      ->type_name("FILE|JOB")
      ->required();
  sub.add_option("--manifest", manifest_path,
                 "The manifest the layout was planned from (a job's chunks name their own)")
      ->type_name("FILE");
}

Result<void> layout_or_job_usage(bool job, const std::string& layout_path,
                                 const std::string& manifest_path) {
  if (job && !manifest_path.empty()) {
    return Error{
        fmt::format("--manifest: {} is a job, whose chunks name their own manifests; "
                    "drop --manifest",
                    display_name(layout_path))};
  }
  if (!job && manifest_path.empty()) {
    return Error{fmt::format("--manifest is required: {} is a layout, not a job",
                             display_name(layout_path))};
  }
  return {};
}

void add_link_gbps(CLI::App& sub, double& gbps) {
  sub.add_option("--link-gbps", gbps,
                 "Estimate the collectives' time per step on links of this many gigabits per "
                 "second per rank (ring model)")
      ->type_name("X")
      ->check(positive_number_up_to(1e6, "Gb/s"));
}

void add_max_input_size(CLI::App& sub, std::uint64_t& max_bytes) {
  sub.add_option("--max-input-size", max_bytes,
                 "Refuse input files larger than this many bytes (suffixes K, M, G: powers of "
                 "1024) [default: 1G]")
      ->type_name("BYTES")
      ->transform(byte_size(1, kLargestInputBytes));
}

}  // namespace paramlayout::cli
