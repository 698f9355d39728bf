// What changed between two jobs: their sizes and launch, the model, and chunk by chunk what
// moved in the buffers (a model revision, a new world size, another launch line).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/diff.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// One chunk of a job as diff_jobs reads it: what job.json says of it, and its files parsed.
struct JobDiffChunk {
  const JobRecordChunk* record = nullptr;
  const Manifest* manifest = nullptr;
  const Layout* layout = nullptr;
};

/// A job read back. Everything is borrowed: it must outlive the JobDiff made of it.
struct JobDiffInput {
  const JobRecord* record = nullptr;
  std::vector<JobDiffChunk> chunks;  ///< as job.json lists them
  /// The bytes of the launch's Hugging Face config as read now from its recorded path, or
  /// nullopt with `config_problem` saying why not ("config.json: no such file"). Only read
  /// where the two launches' configs differ; diff_jobs checks them against the recorded hash.
  std::optional<std::string_view> config_text;
  std::string config_problem;
};

/// A launch argument given differently: its values as given (tokens joined by spaces, "" for
/// a flag without a value; several occurrences joined by ", "), nullopt where not given.
struct ArgumentChange {
  std::string argument;
  std::optional<std::string> before;
  std::optional<std::string> after;
};

/// A file other than the config that only one launch read (by content: its SHA-256).
struct LaunchFileChange {
  std::string given;
  std::string sha256;
  bool added = false;  ///< read by the new launch only; else by the old one only
};

/// A field of the two configs that differs: `a.b` for nested keys, values as JSON text
/// (arrays compared whole), nullopt where the config has no such key.
struct ConfigFieldChange {
  std::string key;
  std::optional<std::string> before;
  std::optional<std::string> after;
};

/// The Hugging Face configs the two launches read (nothing where a job records no launch).
struct ConfigDiff {
  std::optional<std::string> before_given;  ///< as the launch named it; nullopt: none
  std::optional<std::string> after_given;
  std::string before_sha256;  ///< as recorded
  std::string after_sha256;
  bool compared = false;  ///< both read back as recorded: `fields` lists what differs
  /// Why the configs, which differ, were not compared field by field (a file gone, or
  /// changed since its job was planned); "" when compared or the same.
  std::string not_compared;
  std::vector<ConfigFieldChange> fields;

  /// Another config, or one launch without one.
  bool differs() const;
};

/// Where a param is in a job: its chunk, shape and size.
struct JobParamPlace {
  std::int64_t stage = 0;
  std::int64_t chunk = 0;
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
};

/// A param of either job that came, went, changed shape or moved to another chunk. Params
/// are matched by their name in the whole model: a chunk's `decoder.layers.I` is the job's
/// layer `layers[I]` of that chunk.
struct JobParamChange {
  std::string name;
  std::optional<JobParamPlace> before;
  std::optional<JobParamPlace> after;
  bool resized = false;  ///< in both, another shape
  bool moved = false;    ///< in both, another (stage, chunk)
};

/// One (stage, chunk) of either job.
struct JobChunkDiff {
  std::int64_t stage = 0;
  std::int64_t chunk = 0;
  const JobRecordChunk* before = nullptr;  ///< nullptr: only in the new job
  const JobRecordChunk* after = nullptr;   ///< nullptr: only in the old job
  std::optional<LayoutDiff> layout;        ///< the layouts' diff, where in both
  bool identical = false;  ///< job.json's entry, manifest and layout the same (but generator)
  /// Buckets of the new layout whose bounds no bucket of the old layout's same buffer has.
  std::size_t buckets_moved = 0;
  std::size_t buckets_after = 0;  ///< buckets of the new layout
  /// The job-wide param changes that land in this chunk (after) or leave it (before).
  std::size_t params_added = 0;
  std::size_t params_removed = 0;
  std::size_t params_resized = 0;
  std::size_t params_moved_in = 0;
  std::size_t params_moved_out = 0;

  /// `stageS.chunkC`.
  std::string name() const;
};

/// What differs between two jobs, in the order people read it: options and sizes, the
/// launch, the model (config fields, params), then chunk by chunk.
struct JobDiff {
  std::string generator_before;
  std::string generator_after;
  /// job.json's figures that differ, by their job.json key (model, world_size, dp,
  /// expert_dp, tp, pp, vpp, cp, ep, etp, strategy, packer, param_dtype, grad_dtype,
  /// dense_shards, expert_shards), values as JSON text.
  std::vector<OptionChange> options;
  std::int64_t heaviest_stage_before = 0;
  std::int64_t heaviest_stage_after = 0;
  BytesPerRank heaviest_bytes_before;
  BytesPerRank heaviest_bytes_after;
  /// Each job's rank with the largest peak memory (job.json's memory); nullopt where it
  /// records none.
  std::optional<RankMemory> peak_before;
  std::optional<RankMemory> peak_after;
  bool before_has_launch = false;
  bool after_has_launch = false;
  std::vector<ArgumentChange> arguments;  ///< where both record their launch
  std::vector<LaunchFileChange> files;
  std::vector<std::string> ignored_added;  ///< ignored arguments
  std::vector<std::string> ignored_removed;
  std::vector<std::string> notes_added;
  std::vector<std::string> notes_removed;
  ConfigDiff config;
  std::vector<JobParamChange> params;  ///< the new job's order, then params only in the old
  std::vector<JobChunkDiff> chunks;    ///< by (stage, chunk)
  /// job.json, its generator, file hashes and paths aside, is not the same.
  bool records_differ = false;

  std::size_t params_added() const;
  std::size_t params_removed() const;
  std::size_t params_resized() const;
  std::size_t params_moved() const;
  std::size_t chunks_differing() const;  ///< added, removed or not identical
  bool heaviest_differs() const;
  /// Whether the heaviest rank by peak, or its figures, differ (both jobs recording them).
  bool peak_differs() const;
  /// True when job.json and every chunk's files are the same, the generator aside.
  bool identical() const;
  /// One line: "identical", or "options changed: world_size, dp; 2 launch arguments; ...".
  std::string verdict() const;
};

/// The differences between two jobs; fails when a chunk's layout breaks a promise of
/// check_structure (naming the chunk) or a figure does not fit in 64 bits.
Result<JobDiff> diff_jobs(const JobDiffInput& before, const JobDiffInput& after);

/// The members of two JSON objects whose values differ, key by key (nested objects as
/// `a.b`); fails when either text is not a JSON object (`source` names it).
Result<std::vector<ConfigFieldChange>> diff_json_fields(std::string_view before,
                                                        std::string_view before_source,
                                                        std::string_view after,
                                                        std::string_view after_source);

/// The launch arguments given differently: `--num-layers 61` against `--num-layers 62`,
/// arguments only in one line; in the new line's order, then those only in the old one.
std::vector<ArgumentChange> diff_arguments(const std::vector<std::string>& before,
                                           const std::vector<std::string>& after);

/// The diff as one JSON object (docs/formats.md, Other machine-readable output).
std::string job_diff_to_json(const JobDiff& diff);

}  // namespace paramlayout
