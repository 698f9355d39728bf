// paramlayout diff: what changed between two layouts (or two jobs, diff_job.cpp), for
// reviewers and CI gates.
#include <fmt/format.h>

#include "commands.hpp"
#include "diff_job.hpp"
#include "inputs.hpp"
#include "io.hpp"
#include "job_input.hpp"
#include "paramlayout/diff.hpp"
#include "summary.hpp"

namespace paramlayout::cli {
namespace {

std::string place_text(const std::optional<Placement>& p) {
  if (!p) return "-";
  return fmt::format("{} [{}, {}) bucket {}", describe(p->key), group_digits(p->start),
                     group_digits(p->end), p->bucket);
}

std::string owners_text(const std::optional<Placement>& p) {
  if (!p) return "-";
  if (!p->owners) return "all ranks";
  if (p->owners->first == p->owners->last) return fmt::format("rank {}", p->owners->first);
  return fmt::format("ranks {}-{}", p->owners->first, p->owners->last);
}

std::string figure_text(const std::optional<BufferFigures>& f, std::int64_t BufferFigures::*field) {
  return f ? group_digits((*f).*field) : std::string("-");
}

void print_list(const LayoutDiff& d, std::string_view title, std::size_t limit,
                bool (*keep)(const ParamChange&), bool show_owners) {
  std::vector<const ParamChange*> rows;
  for (const ParamChange& c : d.changes) {
    if (keep(c)) rows.push_back(&c);
  }
  if (rows.empty()) return;
  fmt::print("\n{} ({}):\n", title, rows.size());
  std::size_t width = 4;
  const std::size_t shown = limit == 0 ? rows.size() : std::min(limit, rows.size());
  for (std::size_t i = 0; i < shown; ++i) width = std::max(width, rows[i]->name.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const ParamChange& c = *rows[i];
    if (show_owners) {
      fmt::print("  {:<{}}  {} -> {}\n", c.name, width, owners_text(c.before),
                 owners_text(c.after));
    } else {
      fmt::print("  {:<{}}  {} -> {}\n", c.name, width, place_text(c.before), place_text(c.after));
    }
  }
  if (shown < rows.size())
    fmt::print("  ... and {} more (--limit 0 shows all)\n", rows.size() - shown);
}

void print_text(const LayoutDiff& d, std::size_t limit) {
  fmt::print("{}\n", d.verdict());
  if (!d.options.empty()) {
    std::size_t width = 0;
    for (const OptionChange& o : d.options) width = std::max(width, o.name.size());
    fmt::print("\noptions:\n");
    for (const OptionChange& o : d.options) {
      fmt::print("  {:<{}}  {} -> {}\n", o.name, width, diff_value_text(o.before),
                 diff_value_text(o.after));
    }
  }
  if (!d.warnings.empty()) fmt::print("\n");
  for (const std::string& warning : d.warnings) fmt::print("warning: {}\n", warning);
  if (d.identical()) return;

  auto change = [](const BufferChange& b, std::int64_t BufferFigures::*field) {
    return fmt::format("{} -> {}", figure_text(b.before, field), figure_text(b.after, field));
  };
  constexpr const char* kRow = "  {:<30} {:>34} {:>34} {:>10}\n";
  fmt::print("\n");
  fmt::print(kRow, "buffer", "numel", "padding", "buckets");
  for (const BufferChange& b : d.buffers) {
    fmt::print(kRow, describe(b.key), change(b, &BufferFigures::numel),
               change(b, &BufferFigures::padding), change(b, &BufferFigures::buckets));
  }
  fmt::print("\n  per rank    {:>12} {:>12}\n", "before", "after");
  const auto bytes = [](std::int64_t n) { return human_bytes(static_cast<double>(n)); };
  fmt::print("  params      {:>12} {:>12}\n", bytes(d.bytes_before.params),
             bytes(d.bytes_after.params));
  fmt::print("  grads       {:>12} {:>12}\n", bytes(d.bytes_before.grads),
             bytes(d.bytes_after.grads));

  print_list(
      d, "added", limit, [](const ParamChange& c) { return !c.before; }, false);
  print_list(
      d, "removed", limit, [](const ParamChange& c) { return !c.after; }, false);
  print_list(
      d, "resized", limit, [](const ParamChange& c) { return c.resized; }, false);
  print_list(
      d, "moved", limit, [](const ParamChange& c) { return c.moved; }, false);
  print_list(
      d, "owner changed", limit, [](const ParamChange& c) { return c.owner_changed; }, true);
}

}  // namespace

void setup_diff(CLI::App& sub, DiffCommand& command) {
  sub.add_option("OLD", command.old_layout, "Job (directory or job.json) or layout before")
      ->type_name("JOB|LAYOUT")
      ->required();
  sub.add_option("NEW", command.new_layout, "Job or layout after")
      ->type_name("JOB|LAYOUT")
      ->required();
  sub.add_flag("--json", command.json, "Print one JSON object instead of tables");
  sub.add_option("--limit", command.limit, "Rows per list (0: all)")
      ->type_name("N")
      ->capture_default_str();
  add_max_input_size(sub, command.max_input);
}

Result<ExitCode> run_diff(const DiffCommand& command) {
  const bool old_job = is_job_input(command.old_layout);
  const bool new_job = is_job_input(command.new_layout);
  if (old_job && new_job) return run_job_diff(command);
  if (old_job || new_job) {
    const std::string& layout = old_job ? command.new_layout : command.old_layout;
    if (Result<std::string> text = read_file(layout, command.max_input); !text) {
      return text.error();
    }
    return Error{
        fmt::format("{} is a job and {} is not: diff compares two jobs (directories or "
                    "job.json) or two layouts",
                    old_job ? command.old_layout : command.new_layout,
                    old_job ? command.new_layout : command.old_layout)};
  }
  Result<Layout> before = load_layout(command.old_layout, command.max_input);
  if (!before) return before.error();
  Result<Layout> after = load_layout(command.new_layout, command.max_input);
  if (!after) return after.error();
  const Result<LayoutDiff> diff = diff_layouts(*before, *after);
  if (!diff) return diff.error();
  const LayoutDiff& d = *diff;
  if (command.json) {
    fmt::print("{}", diff_to_json(d));
  } else {
    print_text(d, command.limit);
  }
  return d.identical() ? kExitOk : kExitWrong;
}

}  // namespace paramlayout::cli
