#include "verify_output.hpp"

#include <fmt/format.h>

#include <chrono>

#include "io.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

BackendChoice backend_of(const std::string& name) {
  if (name == "cpu") return BackendChoice::cpu;
  if (name == "nccl") return BackendChoice::nccl;
  return BackendChoice::automatic;
}

}  // namespace

bool failed_together(ProcessGroup& group, const std::optional<std::string>& mine) {
  const std::optional<std::string> failure = group.first_failure(mine);
  if (failure && group.reports()) print_error(Error{*failure});
  return failure.has_value();
}

VerifyOptions verify_options(const VerifyCommand& command, ProcessGroup& group) {
  VerifyOptions options;
  options.backend = backend_of(command.backend);
  options.gpus = command.gpus;
  options.timeout_seconds = command.timeout;
  options.max_block_elements = command.chunk_elements;
  options.processes = &group;
  options.max_elements = command.max_elements;
  return options;
}

std::function<void(const VerifyProgress&)> progress_printer(std::function<std::string()> label) {
  using Clock = std::chrono::steady_clock;
  const bool live = is_terminal(stderr);
  return [live, label = std::move(label), start = Clock::now(), last = Clock::time_point(),
          last_label = std::string()](const VerifyProgress& p) mutable {
    if (p.buckets == 0) return;
    const auto now = Clock::now();
    const std::string what = label ? label() : std::string();
    if (what != last_label) {  // a new layout: its own clock
      start = now;
      last_label = what;
    }
    const double seconds = std::chrono::duration<double>(now - start).count();
    const double share =
        p.elements > 0 ? static_cast<double>(p.elements_done) / static_cast<double>(p.elements)
                       : 1.0;
    const bool done = p.buckets_done == p.buckets;
    std::string left;
    if (share > 0 && !done) left = fmt::format(", about {:.0f} s left", seconds / share - seconds);
    const std::string line =
        fmt::format("verifying{}: bucket {}/{}, {} of {} elements ({:.0f}%){}",
                    what.empty() ? std::string() : " " + what, p.buckets_done, p.buckets,
                    group_digits(p.elements_done), group_digits(p.elements), 100 * share, left);
    if (live) {
      fmt::print(stderr, "\r\033[K{}", done ? std::string() : line);
    } else if (p.elements_done == 0 || (now - last >= std::chrono::seconds(10) && !done)) {
      fmt::print(stderr, "{}\n", line);
      last = now;
    }
    std::fflush(stderr);
  };
}

void print_findings(const VerifyReport& r, const Layout& layout, const std::string& name) {
  for (const BucketReport& b : r.buckets) {
    for (const std::string& p : b.incomplete_params) {
      fmt::print("{}: buffer {}, bucket {}: param {} did not arrive whole\n", name, b.buffer,
                 b.bucket, p);
    }
  }
  for (const ElementMismatch& m : r.first_mismatches) {
    fmt::print(
        "{}: buffer {} ({}), bucket {}, rank {}, {}: {} at offset {}: expected {}, "
        "received {}\n",
        name, m.buffer, describe(layout.buffers[m.buffer].key), m.bucket, m.rank, m.round,
        m.param.empty() ? std::string("padding")
                        : fmt::format("param \"{}\" element {}", m.param, m.element),
        m.offset, m.expected, m.received);
  }
}

void Throughput::add(const BucketReport& b) {
  fill_bytes += b.filled_bytes;
  fill_seconds += b.fill_seconds;
  check_bytes += b.checked_bytes;
  check_seconds += b.check_seconds;
}

std::string Throughput::line() const {
  if (fill_seconds <= 0 || check_seconds <= 0) return {};
  return fmt::format("  fill {:.1f} GB/s ({} written), check {:.1f} GB/s ({} compared)\n",
                     fill_bytes / fill_seconds / 1e9, human_bytes(fill_bytes),
                     check_bytes / check_seconds / 1e9, human_bytes(check_bytes));
}

}  // namespace paramlayout::cli
