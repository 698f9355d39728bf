// What the two forms of verify (a layout, a job) share: their options as the core takes them,
// the progress line, and the lines that say where a layout went wrong.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "commands.hpp"
#include "paramlayout/verify.hpp"

namespace paramlayout::cli {

/// True on every process when any failed, naming the first failure once (rank 0 prints it
/// while the processes are still joined: once they part, a peer's exit may end this one
/// before main could print).
bool failed_together(ProcessGroup& group, const std::optional<std::string>& mine);

/// verify JOB: every chunk --stage and --chunk select, one report for the job.
Result<ExitCode> run_verify_job(const VerifyCommand& command, ProcessGroup& group);

/// The command's flags as the core's options; the data pass spans `group`.
VerifyOptions verify_options(const VerifyCommand& command, ProcessGroup& group);

/// Progress on stderr: a live line on a terminal, a line every 10 s (and whenever `label`
/// changes) in a log; both with the share of elements done and an estimate of the time left.
/// `label` names what is being verified ("stage1.chunk0, chunk 2 of 4"), or is empty.
std::function<void(const VerifyProgress&)> progress_printer(std::function<std::string()> label);

/// Each param that did not arrive whole and each of the first wrong elements, a line each,
/// starting with `name`.
void print_findings(const VerifyReport& report, const Layout& layout, const std::string& name);

/// The report's fill and check throughput over `buckets`' figures ("" when not measured).
struct Throughput {
  double fill_bytes = 0;
  double fill_seconds = 0;
  double check_bytes = 0;
  double check_seconds = 0;
  void add(const BucketReport& b);
  /// "  fill 12.3 GB/s (1.2 GB written), check ...\n", or "" when not measured.
  std::string line() const;
};

}  // namespace paramlayout::cli
