// paramlayout verify JOB: the chunks of a job, each at its own dp and expert dp, one after
// another on one backend, and one report for the job.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "paramlayout/text.hpp"
#include "verify_output.hpp"

namespace paramlayout::cli {
namespace {

/// The chunks --stage and --chunk select, in job.json's order (stage-major), or why none.
Result<std::vector<const JobChunkInput*>> selected_chunks(const LoadedJob& job,
                                                          const VerifyCommand& command) {
  std::vector<const JobChunkInput*> selected;
  std::int64_t stages = 0;
  std::int64_t chunks = 0;
  for (const JobChunkInput& c : job.chunks) {
    stages = std::max(stages, c.record->stage + 1);
    chunks = std::max(chunks, c.record->chunk + 1);
    if (command.stage && *command.stage != c.record->stage) continue;
    if (command.chunk && *command.chunk != c.record->chunk) continue;
    selected.push_back(&c);
  }
  if (!selected.empty()) return selected;
  const std::string& json = job.job.json_path;
  if (command.stage && *command.stage >= stages) {
    return Error{
        fmt::format("--stage {}: {} has stages 0 to {}", *command.stage, json, stages - 1)};
  }
  if (command.chunk && *command.chunk >= chunks) {
    return Error{fmt::format("--chunk {}: {} has chunks 0 to {} in each stage", *command.chunk,
                             json, chunks - 1)};
  }
  return Error{fmt::format("{}: no chunk to verify", json)};
}

/// What every process must agree on before the data pass: the chunks, in order, and their
/// files' bytes.
std::string selection_key(const std::vector<const JobChunkInput*>& chunks) {
  std::string key;
  for (const JobChunkInput* c : chunks) {
    key += fmt::format("{} {} {}\n", c->record->name(), sha256_hex(c->manifest_text),
                       sha256_hex(c->layout_text));
  }
  return key;
}

/// The job's table: a row per chunk and the total.
void print_table(const std::vector<ChunkVerifyReport>& reports) {
  constexpr const char* kRow =
      "  {:<16} {:>5} {:>9} {:>7} {:>7} {:>17} {:>8} {:>10} {:>11} {:>11}\n";
  fmt::print(kRow, "chunk", "dp", "expert dp", "buffers", "buckets", "elements", "#wrong",
             "time ms", "algbw GB/s", "busbw GB/s");
  struct Sums {
    std::int64_t buffers = 0, buckets = 0, elements = 0, wrong = 0;
    double bytes = 0, bus_bytes = 0, seconds = 0;
    void add(const Sums& s) {
      buffers += s.buffers, buckets += s.buckets, elements += s.elements, wrong += s.wrong;
      bytes += s.bytes, bus_bytes += s.bus_bytes, seconds += s.seconds;
    }
  };
  const auto row = [&](const std::string& name, const std::string& dp, const std::string& expert_dp,
                       const Sums& s) {
    fmt::print(kRow, name, dp, expert_dp, s.buffers, s.buckets, group_digits(s.elements), s.wrong,
               fmt::format("{:.2f}", s.seconds * 1e3),
               fmt::format("{:.2f}", s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0.0),
               fmt::format("{:.2f}", s.seconds > 0 ? s.bus_bytes / s.seconds / 1e9 : 0.0));
  };
  Sums total;
  Throughput throughput;
  for (const ChunkVerifyReport& c : reports) {
    const std::string dp = std::to_string(c.layout->options.dp);
    const std::string expert_dp = std::to_string(c.layout->options.expert_dp);
    if (!c.report.violations.empty()) {
      fmt::print(kRow, c.name, dp, expert_dp, c.layout->buffers.size(), "-", "-", "broken", "-",
                 "-", "-");
      continue;
    }
    Sums s;
    s.buffers = static_cast<std::int64_t>(c.layout->buffers.size());
    for (const BucketReport& b : c.report.buckets) {
      const double bytes = b.reduce_scatter_bytes + b.all_gather_bytes;
      ++s.buckets;
      s.elements += b.elements;
      s.wrong += b.grad_mismatches + b.param_mismatches;
      s.bytes += bytes;
      s.bus_bytes += b.devices > 0 ? bytes * static_cast<double>(b.devices - 1) /
                                         static_cast<double>(b.devices)
                                   : 0;
      s.seconds += b.seconds();
      throughput.add(b);
    }
    row(c.name, dp, expert_dp, s);
    total.add(s);
  }
  row("total", "", "", total);
  fmt::print("{}", throughput.line());
}

/// The last line: every chunk verified, or the ones that are not.
void print_verdict(const std::string& job, const std::vector<ChunkVerifyReport>& reports,
                   bool quiet) {
  std::vector<std::string> failed;
  std::int64_t buckets = 0;
  std::int64_t elements = 0;
  double bytes = 0;
  double collectives = 0;
  double seconds = 0;
  for (const ChunkVerifyReport& c : reports) {
    seconds += c.report.seconds;
    for (const BucketReport& b : c.report.buckets) {
      ++buckets;
      elements += b.elements;
      bytes += b.reduce_scatter_bytes + b.all_gather_bytes;
      collectives += b.seconds();
    }
    if (c.report.ok()) continue;
    if (quiet) {
      failed.push_back(c.name);
    } else if (!c.report.violations.empty()) {
      const std::size_t n = c.report.violations.size();
      failed.push_back(
          fmt::format("{} ({} problem{}, no data pass)", c.name, n, n == 1 ? "" : "s"));
    } else {
      const std::int64_t n = c.report.mismatches;
      failed.push_back(fmt::format("{} ({} element{} differ{})", c.name, n, n == 1 ? "" : "s",
                                   n == 1 ? "s" : ""));
    }
  }
  const std::size_t n = reports.size();
  if (quiet) {
    fmt::print("{}: {}\n", job,
               failed.empty() ? fmt::format("verified ({} chunk{})", n, n == 1 ? "" : "s")
                              : fmt::format("wrong: {}", fmt::join(failed, ", ")));
  } else if (failed.empty()) {
    fmt::print(
        "{}: verified: {} chunk{}, {} buckets, {} elements, every element where it "
        "belongs ({} moved in {:.3f} s of collectives, {:.1f} s in all)\n",
        job, n, n == 1 ? "" : "s", buckets, group_digits(elements), human_bytes(bytes), collectives,
        seconds);
  } else {
    fmt::print("{}: wrong: {}; {} of {} chunk{} verified\n", job, fmt::join(failed, ", "),
               n - failed.size(), n, n == 1 ? "" : "s");
  }
}

}  // namespace

Result<ExitCode> run_verify_job(const VerifyCommand& command, ProcessGroup& group) {
  const bool speaks = group.reports();
  std::optional<std::string> problem;
  Result<LoadedJob> job = Error{""};
  std::vector<const JobChunkInput*> chunks;
  if (Result<void> usage = layout_or_job_usage(true, command.layout, command.manifest); !usage) {
    problem = usage.error().message;
  } else if (job = load_job(command.layout, command.max_input); !job) {
    problem = job.error().message;
  } else if (Result<void> recorded = require_as_recorded(*job); !recorded) {
    problem = recorded.error().message;
  } else if (auto selected = selected_chunks(*job, command); !selected) {
    problem = selected.error().message;
  } else {
    chunks = std::move(*selected);
  }
  if (failed_together(group, problem)) return kExitBadInput;
  // Every process reads the job itself: they must find the same chunks in the same files.
  if (group.size() > 1 && !group.all_agree(selection_key(chunks))) {
    if (speaks) {
      print_error(Error{fmt::format(
          "{}: the {} processes do not find the same chunks in the same files (--stage, "
          "--chunk and the job's files must be the same for every process)",
          job->job.json_path, group.size())});
    }
    return kExitBadInput;
  }

  VerifyOptions options = verify_options(command, group);
  std::string current;  // what the progress line names
  if (!command.quiet && speaks) options.progress = progress_printer([&current] { return current; });
  VerifySession session(std::move(options));
  std::vector<ChunkVerifyReport> reports;
  reports.reserve(chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const JobChunkInput& c = *chunks[i];
    current = fmt::format("{} (chunk {} of {})", c.record->name(), i + 1, chunks.size());
    Result<VerifyReport> report = session.verify(c.layout, c.manifest);
    if (!report) {
      // Every process fails alike here (the backend agrees on its failures); rank 0 says
      // so while the processes are still joined.
      if (speaks) print_error(Error{c.record->name() + ": " + report.error().message});
      return kExitBadInput;
    }
    reports.push_back(
        {c.record->name(), c.record->stage, c.record->chunk, &c.layout, std::move(*report)});
  }
  const bool ok = std::all_of(reports.begin(), reports.end(),
                              [](const ChunkVerifyReport& r) { return r.report.ok(); });
  if (!speaks) return ok ? kExitOk : kExitWrong;

  const std::string& name = job->job.json_path;
  for (const ChunkVerifyReport& c : reports) {
    for (const std::string& note : c.report.notes) print_note(note);
  }
  if (!command.report.empty()) {
    if (Result<void> written = write_output(command.report, verify_job_report_json(name, reports));
        !written) {
      return written.error();
    }
  }
  if (!command.quiet) {
    const auto started =
        std::find_if(reports.begin(), reports.end(),
                     [](const ChunkVerifyReport& r) { return !r.report.backend.empty(); });
    fmt::print("{}: {} of {} chunk{}, {}\n", name, reports.size(), job->chunks.size(),
               job->chunks.size() == 1 ? "" : "s",
               started == reports.end() ? std::string("no data pass")
                                        : "data pass on " + started->report.backend);
    print_table(reports);
    for (const ChunkVerifyReport& c : reports) {
      const std::string where = name + ": " + c.name;
      for (const Violation& v : c.report.violations) fmt::print("{}: {}\n", where, v.message());
      print_findings(c.report, *c.layout, where);
    }
  }
  print_verdict(name, reports, command.quiet);
  return ok ? kExitOk : kExitWrong;
}

}  // namespace paramlayout::cli
