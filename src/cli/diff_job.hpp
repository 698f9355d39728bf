// paramlayout diff OLD_JOB NEW_JOB: what changed between two jobs, for reviewers and CI.
#pragma once

#include <cstddef>
#include <string>

#include "commands.hpp"
#include "paramlayout/job_diff.hpp"

namespace paramlayout::cli {

/// `diff` of two job inputs (is_job_input): options and sizes, the launch, the model, then
/// chunk by chunk; exit 0 when the jobs are the same.
Result<ExitCode> run_job_diff(const DiffCommand& command);

/// The table of chunks, runs of chunks that changed alike folded into one row, at most
/// `limit` rows (0: all).
void print_job_chunks(const JobDiff& diff, std::size_t limit);

/// A JSON value as diff's tables show it: strings unquoted, null as "none", integers grouped
/// ("129,280").
std::string diff_value_text(const std::string& json);

/// "a -> b", or "a" when they are the same.
std::string change(const std::string& before, const std::string& after);

/// Bytes per rank (params, grads and optimizer state together) before and after:
/// "15.43 GiB -> 15.44 GiB (+12.00 MiB)", or "15.43 GiB" when they are the same.
std::string bytes_change(const BytesPerRank& before, const BytesPerRank& after);

}  // namespace paramlayout::cli
