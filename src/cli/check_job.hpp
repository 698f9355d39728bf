// check's job form: a job directory or its job.json checked whole.
#pragma once

#include "commands.hpp"

namespace paramlayout::cli {

/// `check JOB [--replan]`: every chunk's promises, job.json against its files, files job.json
/// does not name; with --replan, the recorded launch planned again and compared file by file.
Result<ExitCode> run_check_job(const CheckCommand& command);

}  // namespace paramlayout::cli
