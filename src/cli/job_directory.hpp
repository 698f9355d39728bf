// A job directory written whole or not at all: the new job is written beside the old one and
// takes its place in one step, so that no reader and no interruption ever sees two jobs mixed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"

namespace paramlayout::cli {

/// True for the names of a job's files: `job.json` and `stageS.chunkC.manifest.json`,
/// `stageS.chunkC.layout.json` (S, C decimal numbers).
bool is_job_file_name(std::string_view name);

/// Makes the directory `dir` hold exactly `files` (each named by `is_job_file_name`) and
/// nothing else, replacing what it held as a whole. The job is written and synced in
/// `.NAME.paramlayout-new-PID` beside `dir`, which then takes its place: exchanged with it by
/// renameat2(RENAME_EXCHANGE), or where the filesystem cannot, with `dir` first renamed aside
/// to `.NAME.paramlayout-old-PID`; the old job is removed last. A symbolic link is followed:
/// the directory it names is replaced and the link kept. A catchable fatal signal removes the
/// directory being written; what a killed run leaves beside `dir` (`.NAME.paramlayout-*-PID`
/// of a process that is gone, holding only job files) is removed by the next call.
///
/// An error, with nothing changed, when `dir` holds anything that is not a job's file (named
/// in the message) unless `replace_foreign`, or when it is not a directory.
Result<void> write_job_directory(const std::string& dir, const std::vector<JobFile>& files,
                                 bool replace_foreign);

}  // namespace paramlayout::cli
