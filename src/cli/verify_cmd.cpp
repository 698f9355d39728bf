// paramlayout verify: the static pass, then every bucket through the real collectives.
#include <fmt/format.h>

#include <limits>
#include <optional>

#include "commands.hpp"
#include "flags.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "paramlayout/text.hpp"
#include "paramlayout/verify.hpp"
#include "verify_output.hpp"

namespace paramlayout::cli {
namespace {

void print_report(const VerifyReport& r, const Layout& layout, const std::string& name) {
  constexpr const char* kRow = "  {:<32} {:>6} {:>6} {:>17} {:>8} {:>10} {:>11} {:>11}\n";
  fmt::print(kRow, "buffer", "bucket", "ranks", "elements", "#wrong", "time ms", "algbw GB/s",
             "busbw GB/s");
  double bytes = 0;
  double seconds = 0;
  std::int64_t elements = 0;
  Throughput throughput;
  for (const BucketReport& b : r.buckets) {
    fmt::print(kRow, describe(layout.buffers[b.buffer].key), b.bucket, b.ranks,
               group_digits(b.elements), b.grad_mismatches + b.param_mismatches,
               fmt::format("{:.2f}", b.seconds() * 1e3), fmt::format("{:.2f}", b.algbw() / 1e9),
               fmt::format("{:.2f}", b.busbw() / 1e9));
    bytes += b.reduce_scatter_bytes + b.all_gather_bytes;
    seconds += b.seconds();
    elements += b.elements;
    throughput.add(b);
  }
  print_findings(r, layout, name);
  fmt::print("{}", throughput.line());
  if (r.ok()) {
    fmt::print(
        "{}: verified: {} buckets, {} elements, every element where it belongs "
        "({} moved in {:.3f} s of collectives, {:.1f} s in all)\n",
        name, r.buckets.size(), group_digits(elements), human_bytes(bytes), seconds, r.seconds);
  } else {
    fmt::print("{}: wrong: {} element{} differ{}{}\n", name, r.mismatches,
               r.mismatches == 1 ? "" : "s", r.mismatches == 1 ? "s" : "",
               r.first_mismatches.size() < static_cast<std::size_t>(r.mismatches)
                   ? " (the first 10 above)"
                   : "");
  }
}

/// verify LAYOUT --manifest MANIFEST.
Result<ExitCode> run_verify_layout(const VerifyCommand& command, ProcessGroup& group) {
  const bool speaks = group.reports();
  std::optional<std::string> problem;
  Result<LayoutWithManifest> inputs = Error{""};
  if (Result<void> usage = layout_or_job_usage(false, command.layout, command.manifest); !usage) {
    // What is wrong with the file first: one that is missing or not a layout.
    Result<Layout> layout = load_layout(command.layout, command.max_input);
    problem = layout ? usage.error().message : layout.error().message;
  } else if (command.stage || command.chunk) {
    problem = fmt::format("{}: {} is a layout; only a job has stages and chunks to select",
                          command.stage ? "--stage" : "--chunk", display_name(command.layout));
  } else if (inputs =
                 load_layout_with_manifest(command.layout, command.manifest, command.max_input);
             !inputs) {
    problem = inputs.error().message;
  }
  if (failed_together(group, problem)) return kExitBadInput;
  const Manifest& manifest = inputs->manifest;
  const Layout& layout = inputs->layout;
  const std::string name = display_name(command.layout);

  VerifyOptions options = verify_options(command, group);
  if (!command.quiet && speaks) options.progress = progress_printer({});
  Result<VerifyReport> report = verify_layout(layout, manifest, options);
  if (!report) {
    if (speaks) print_error(report.error());  // as above: before the group is finalized
    return kExitBadInput;
  }
  if (!speaks) return report->ok() ? kExitOk : kExitWrong;
  for (const std::string& note : report->notes) print_note(note);
  if (!command.report.empty()) {
    if (Result<void> written = write_output(command.report, verify_report_json(*report, layout));
        !written) {
      return written.error();
    }
  }
  if (!report->violations.empty()) {
    for (const Violation& v : report->violations) fmt::print("{}: {}\n", name, v.message());
    fmt::print("{}: broken: {} problem{}; no data pass\n", name, report->violations.size(),
               report->violations.size() == 1 ? "" : "s");
    return kExitWrong;
  }
  if (!command.quiet) fmt::print("{}: data pass on {}\n", name, report->backend);
  if (command.quiet) {
    fmt::print("{}: {}\n", name, report->ok() ? "verified" : "wrong");
  } else {
    print_report(*report, layout, name);
  }
  return report->ok() ? kExitOk : kExitWrong;
}

}  // namespace

void setup_verify(CLI::App& sub, VerifyCommand& command) {
  add_layout_or_job(sub, command.layout, command.manifest);
  sub.add_option("--stage", command.stage, "With a job: only the chunks of this stage")
      ->type_name("S")
      ->check(integer_in(0, 1 << 20));
  sub.add_option("--chunk", command.chunk,
                 "With a job: only this chunk (virtual pipeline stage) of each stage")
      ->type_name("C")
      ->check(integer_in(0, 1 << 20));
  sub.add_option("--backend", command.backend,
                 "auto (nccl when a GPU is visible, else cpu), cpu or nccl")
      ->type_name("NAME")
      ->check(one_of({"auto", "cpu", "nccl"}))
      ->capture_default_str();
  sub.add_option("--gpus", command.gpus,
                 "GPUs to use (nccl; default all visible) or devices to simulate (cpu; "
                 "default 2)")
      ->type_name("N")
      ->check(integer_in(1, 4096));
  sub.add_option("--report", command.report, "Also write the report as JSON (atomically)")
      ->type_name("FILE");
  sub.add_option("--timeout", command.timeout,
                 "Abandon an NCCL operation (creating communicators, a collective) after this "
                 "many seconds (aborting NCCL)")
      ->type_name("SECONDS")
      ->check(seconds_up_to(86400))
      ->capture_default_str();
  sub.add_option("--chunk-elements", command.chunk_elements,
                 "Elements per device block per collective (default: the backend's memory "
                 "budget)")
      ->type_name("N")
      ->check(integer_in(1, std::int64_t{1} << 40));
  sub.add_option("--max-elements", command.max_elements,
                 "Refuse a layout whose buffers hold more elements than this (the work of the "
                 "data pass grows with them)")
      ->type_name("N")
      ->check(integer_in(1, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str();
  sub.add_flag("-q,--quiet", command.quiet, "Only the verdict line");
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_verify(const VerifyCommand& command) {
  // Under an MPI launcher every process runs this, joined before reading inputs; they agree
  // on each failure, so all exit alike, and only rank 0 prints.
  Result<ProcessGroup> group = ProcessGroup::join();
  if (!group) return group.error();
  if (is_job_input(command.layout)) return run_verify_job(command, *group);
  return run_verify_layout(command, *group);
}

}  // namespace paramlayout::cli
