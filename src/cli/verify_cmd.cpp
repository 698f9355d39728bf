// paramlayout verify: the static pass, then every bucket through the real collectives.
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <limits>
#include <optional>

#include "commands.hpp"
#include "flags.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "paramlayout/text.hpp"
#include "paramlayout/verify.hpp"

namespace paramlayout::cli {
namespace {

BackendChoice backend_of(const std::string& name) {
  if (name == "cpu") return BackendChoice::cpu;
  if (name == "nccl") return BackendChoice::nccl;
  return BackendChoice::automatic;
}

void print_report(const VerifyReport& r, const Layout& layout, const std::string& name) {
  constexpr const char* kRow = "  {:<32} {:>6} {:>6} {:>17} {:>8} {:>10} {:>11} {:>11}\n";
  fmt::print(kRow, "buffer", "bucket", "ranks", "elements", "#wrong", "time ms", "algbw GB/s",
             "busbw GB/s");
  double bytes = 0;
  double seconds = 0;
  std::int64_t elements = 0;
  double fill_bytes = 0;
  double fill_seconds = 0;
  double check_bytes = 0;
  double check_seconds = 0;
  for (const BucketReport& b : r.buckets) {
    fmt::print(kRow, describe(layout.buffers[b.buffer].key), b.bucket, b.ranks,
               group_digits(b.elements), b.grad_mismatches + b.param_mismatches,
               fmt::format("{:.2f}", b.seconds() * 1e3), fmt::format("{:.2f}", b.algbw() / 1e9),
               fmt::format("{:.2f}", b.busbw() / 1e9));
    bytes += b.reduce_scatter_bytes + b.all_gather_bytes;
    seconds += b.seconds();
    elements += b.elements;
    fill_bytes += b.filled_bytes;
    fill_seconds += b.fill_seconds;
    check_bytes += b.checked_bytes;
    check_seconds += b.check_seconds;
  }
  for (const BucketReport& b : r.buckets) {
    for (const std::string& p : b.incomplete_params) {
      fmt::print("{}: buffer {}, bucket {}: param {} did not arrive whole\n", name, b.buffer,
                 b.bucket, p);
    }
  }
  for (const ElementMismatch& m : r.first_mismatches) {
    fmt::print("{}: buffer {} ({}), bucket {}, rank {}, {}: {} at offset {}: expected {}, "
               "received {}\n",
               name, m.buffer, describe(layout.buffers[m.buffer].key), m.bucket, m.rank, m.round,
               m.param.empty() ? std::string("padding")
                               : fmt::format("param \"{}\" element {}", m.param, m.element),
               m.offset, m.expected, m.received);
  }
  if (fill_seconds > 0 && check_seconds > 0) {
    fmt::print("  fill {:.1f} GB/s ({} written), check {:.1f} GB/s ({} compared)\n",
               fill_bytes / fill_seconds / 1e9, human_bytes(fill_bytes),
               check_bytes / check_seconds / 1e9, human_bytes(check_bytes));
  }
  if (r.ok()) {
    fmt::print("{}: verified: {} buckets, {} elements, every element where it belongs "
               "({} moved in {:.3f} s of collectives, {:.1f} s in all)\n",
               name, r.buckets.size(), group_digits(elements), human_bytes(bytes), seconds,
               r.seconds);
  } else {
    fmt::print("{}: wrong: {} element{} differ{}{}\n", name, r.mismatches,
               r.mismatches == 1 ? "" : "s", r.mismatches == 1 ? "s" : "",
               r.first_mismatches.size() < static_cast<std::size_t>(r.mismatches)
                   ? " (the first 10 above)"
                   : "");
  }
}

/// Progress on stderr: a live line on a terminal, a line every 10 s in a log; both with
/// the share of elements done and an estimate of the time left.
std::function<void(const VerifyProgress&)> progress_printer() {
  using Clock = std::chrono::steady_clock;
  const bool live = is_terminal(stderr);
  return [live, start = Clock::now(), last = Clock::time_point()](const VerifyProgress& p) mutable {
    if (p.buckets == 0) return;
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - start).count();
    const double share = p.elements > 0 ? static_cast<double>(p.elements_done) /
                                              static_cast<double>(p.elements)
                                        : 1.0;
    const bool done = p.buckets_done == p.buckets;
    std::string left;
    if (share > 0 && !done) left = fmt::format(", about {:.0f} s left", seconds / share - seconds);
    const std::string line =
        fmt::format("verifying: bucket {}/{}, {} of {} elements ({:.0f}%){}", p.buckets_done,
                    p.buckets, group_digits(p.elements_done), group_digits(p.elements),
                    100 * share, left);
    if (live) {
      fmt::print(stderr, "\r\033[K{}", done ? std::string() : line);
    } else if (p.elements_done == 0 || (now - last >= std::chrono::seconds(10) && !done)) {
      fmt::print(stderr, "{}\n", line);
      last = now;
    }
    std::fflush(stderr);
  };
}

}  // namespace

void setup_verify(CLI::App& sub, VerifyCommand& command) {
  add_layout_with_manifest(sub, command.layout, command.manifest);
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
  // Under an MPI launcher every process runs this; they agree on each failure, so all exit
  // alike, and only rank 0 prints.
  Result<ProcessGroup> group = ProcessGroup::join();
  if (!group) return group.error();
  const bool speaks = group->reports();
  Result<LayoutWithManifest> inputs =
      load_layout_with_manifest(command.layout, command.manifest, command.max_input);
  if (std::optional<std::string> failure = group->first_failure(
          inputs ? std::nullopt : std::optional<std::string>(inputs.error().message))) {
    // Rank 0 reports it here, while the processes are still joined: once the group is
    // finalized, a peer's exit may end this process before main could print an Error.
    if (speaks) print_error(Error{*failure});
    return kExitBadInput;
  }
  const Manifest& manifest = inputs->manifest;
  const Layout& layout = inputs->layout;
  const std::string name = display_name(command.layout);

  VerifyOptions options;
  options.backend = backend_of(command.backend);
  options.gpus = command.gpus;
  options.timeout_seconds = command.timeout;
  options.max_block_elements = command.chunk_elements;
  options.processes = &*group;
  options.max_elements = command.max_elements;
  if (!command.quiet && speaks) options.progress = progress_printer();
  Result<VerifyReport> report = verify_layout(layout, manifest, options);
  if (!report) {
    if (speaks) print_error(report.error());  // as above: before the group is finalized
    return kExitBadInput;
  }
  if (!speaks) return report->ok() ? kExitOk : kExitWrong;
  for (const std::string& note : report->notes) fmt::print(stderr, "paramlayout: note: {}\n", note);
  if (!command.report.empty()) {
    if (Result<void> written =
            write_output(command.report, verify_report_json(*report, layout));
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

}  // namespace paramlayout::cli
