// Reading the tool's input files: the errors name the file.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "io.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::cli {

/// The file's name as messages show it ("<stdin>" for "-").
std::string display_name(const std::string& path);

Result<Manifest> load_manifest(const std::string& path, std::uint64_t max_bytes);
Result<Layout> load_layout(const std::string& path, std::uint64_t max_bytes);

/// A layout and the manifest it was planned from, as check, verify and stats read them.
struct LayoutWithManifest {
  Manifest manifest;
  Layout layout;
};
Result<LayoutWithManifest> load_layout_with_manifest(const std::string& layout_path,
                                                     const std::string& manifest_path,
                                                     std::uint64_t max_bytes);
/// Their command-line arguments: LAYOUT and the required --manifest.
void add_layout_with_manifest(
    CLI::App& sub, std::string& layout_path, std::string& manifest_path,
    const std::string& manifest_help = "The manifest it was planned from");

/// LAYOUT, which may also name a job (its directory or job.json), and --manifest, which only
/// a layout takes; layout_or_job_usage says which was given wrongly.
void add_layout_or_job(CLI::App& sub, std::string& layout_path, std::string& manifest_path);
/// The usage error of add_layout_or_job's arguments: --manifest with a job, or none with a
/// layout.
Result<void> layout_or_job_usage(bool job, const std::string& layout_path,
                                 const std::string& manifest_path);

/// --link-gbps: each rank's link, for the ring model's estimate of the collectives' time.
void add_link_gbps(CLI::App& sub, double& gbps);

/// --max-input-size: the largest input file the subcommand reads.
void add_max_input_size(CLI::App& sub, std::uint64_t& max_bytes);

}  // namespace paramlayout::cli
