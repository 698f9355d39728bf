// paramlayout diff OLD_JOB NEW_JOB: the jobs read back (every file checked against job.json),
// compared by diff_jobs, and printed for people: options and sizes, the launch, the model,
// then per chunk, the identical ones folded.
#include "diff_job.hpp"

#include <fmt/format.h>

#include <array>

#include "io.hpp"
#include "job_input.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/job_diff.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string place_name(const JobParamPlace& p) {
  return fmt::format("stage{}.chunk{}", p.stage, p.chunk);
}

/// `decoder.layers.61.` or `mtp.layers.0.`: the layer a param belongs to; "" for others.
std::string_view layer_of(std::string_view name) {
  for (std::string_view prefix : {"decoder.layers.", "mtp.layers."}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    std::size_t i = prefix.size();
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    if (i > prefix.size() && i < name.size() && name[i] == '.') return name.substr(0, i + 1);
  }
  return {};
}

/// Rows of `rows` up to `limit` (0: all), then how many were left out.
void print_rows(const std::vector<std::string>& rows, std::size_t limit) {
  const std::size_t shown = limit == 0 ? rows.size() : std::min(limit, rows.size());
  for (std::size_t i = 0; i < shown; ++i) fmt::print("  {}\n", rows[i]);
  if (shown < rows.size()) {
    fmt::print("  ... and {} more (--limit 0 shows all)\n", rows.size() - shown);
  }
}

/// Lines `name  value` with the names in one column.
std::vector<std::string> aligned(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::size_t width = 0;
  for (const auto& [name, value] : pairs) width = std::max(width, name.size());
  std::vector<std::string> out;
  for (const auto& [name, value] : pairs) {
    out.push_back(fmt::format("{:<{}}  {}", name, width, value));
  }
  return out;
}

void print_options(const JobDiff& d, std::size_t limit) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const OptionChange& o : d.options) {
    rows.emplace_back(o.name, change(diff_value_text(o.before), diff_value_text(o.after)));
  }
  if (d.heaviest_differs()) {
    rows.emplace_back("heaviest stage",
                      fmt::format("stage {}: {} per rank",
                                  change(std::to_string(d.heaviest_stage_before),
                                         std::to_string(d.heaviest_stage_after)),
                                  bytes_change(d.heaviest_bytes_before, d.heaviest_bytes_after)));
  }
  if (d.peak_differs()) {
    const RankMemory& a = *d.peak_before;
    const RankMemory& b = *d.peak_after;
    rows.emplace_back("heaviest peak",
                      fmt::format("stage {}: {} per rank (persistent {}, activations {})",
                                  change(std::to_string(a.stage), std::to_string(b.stage)),
                                  change(human_bytes(static_cast<double>(a.peak_bytes)),
                                         human_bytes(static_cast<double>(b.peak_bytes))),
                                  change(human_bytes(static_cast<double>(a.persistent_bytes)),
                                         human_bytes(static_cast<double>(b.persistent_bytes))),
                                  change(human_bytes(static_cast<double>(a.activation_bytes)),
                                         human_bytes(static_cast<double>(b.activation_bytes)))));
  }
  if (rows.empty()) return;
  fmt::print("\noptions and sizes:\n");
  print_rows(aligned(rows), limit);
}

std::string argument_value(const std::optional<std::string>& v) {
  if (!v) return "(not given)";
  return v->empty() ? "(given)" : excerpt(*v, 60);
}

void print_launch(const JobDiff& d, std::size_t limit) {
  if (d.before_has_launch != d.after_has_launch) {
    fmt::print("\nlaunch: only the {} job records its launch; arguments and config not compared\n",
               d.before_has_launch ? "old" : "new");
  }
  if (!d.arguments.empty()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const ArgumentChange& a : d.arguments) {
      rows.emplace_back(excerpt(a.argument, 60),
                        fmt::format("{} -> {}", argument_value(a.before), argument_value(a.after)));
    }
    fmt::print("\nlaunch arguments ({}):\n", d.arguments.size());
    print_rows(aligned(rows), limit);
  }
  std::vector<std::string> lines;
  for (const LaunchFileChange& f : d.files) {
    lines.push_back(fmt::format("{} {} (SHA-256 {})", f.added ? "+" : "-", excerpt(f.given),
                                excerpt(f.sha256.substr(0, 12))));
  }
  constexpr std::size_t kLine = 200;  // notes are sentences: whole, unless hand-edited
  for (const std::string& a : d.ignored_removed) lines.push_back("- ignored " + excerpt(a));
  for (const std::string& a : d.ignored_added) lines.push_back("+ ignored " + excerpt(a));
  for (const std::string& n : d.notes_removed) lines.push_back("- note: " + excerpt(n, kLine));
  for (const std::string& n : d.notes_added) lines.push_back("+ note: " + excerpt(n, kLine));
  if (lines.empty()) return;
  fmt::print("\nfiles read, ignored arguments, notes (- old, + new):\n");
  print_rows(lines, limit);
}

/// A config field's value, cut to a screen's share.
std::string field_value(const std::optional<std::string>& json) {
  return json ? excerpt(diff_value_text(*json), 60) : std::string("(absent)");
}

void print_config(const ConfigDiff& c, std::size_t limit) {
  if (!c.differs()) return;
  if (!c.before_given || !c.after_given) {
    fmt::print("  config: {} -> {}\n", excerpt(c.before_given.value_or("none")),
               excerpt(c.after_given.value_or("none")));
    return;
  }
  const std::string was = excerpt(*c.before_given);
  const std::string now = excerpt(*c.after_given);
  const std::string names = was == now ? was : was + " -> " + now;
  if (!c.compared) {
    fmt::print("  config {}: another file (SHA-256 {} -> {}); not compared: {}\n", names,
               excerpt(c.before_sha256.substr(0, 12)), excerpt(c.after_sha256.substr(0, 12)),
               c.not_compared);
    return;
  }
  fmt::print("  config {}: {} field{} differ{}\n", names, c.fields.size(),
             c.fields.size() == 1 ? "" : "s", c.fields.size() == 1 ? "s" : "");
  std::vector<std::pair<std::string, std::string>> rows;
  for (const ConfigFieldChange& f : c.fields) {
    rows.emplace_back("  " + excerpt(f.key, 60),
                      fmt::format("{} -> {}", field_value(f.before), field_value(f.after)));
  }
  print_rows(aligned(rows), limit);
}

/// The job-wide param changes of one kind, in columns (param, what, where); the params of
/// one layer that go the same way make one row.
std::vector<std::string> param_rows(const JobDiff& d, bool (*keep)(const JobParamChange&)) {
  std::vector<const JobParamChange*> kept;
  for (const JobParamChange& c : d.params) {
    if (keep(c)) kept.push_back(&c);
  }
  const auto where = [](const JobParamChange& c) {
    if (c.before && c.after) return change(place_name(*c.before), place_name(*c.after));
    return place_name(c.after ? *c.after : *c.before);
  };
  const auto place = [](const JobParamChange& c) -> const JobParamPlace& {
    return c.after ? *c.after : *c.before;
  };
  std::vector<std::array<std::string, 3>> cells;
  for (std::size_t i = 0; i < kept.size();) {
    const JobParamChange& first = *kept[i];
    const std::string_view layer = layer_of(first.name);
    std::size_t j = i + 1;
    std::int64_t elements = place(first).numel;
    while (!layer.empty() && !first.resized && j < kept.size() &&
           layer_of(kept[j]->name) == layer && where(*kept[j]) == where(first)) {
      elements += place(*kept[j]).numel;
      ++j;
    }
    if (first.resized) {
      cells.push_back({first.name,
                       shape_text(first.before->shape) + " -> " + shape_text(first.after->shape),
                       where(first)});
    } else if (j - i > 1) {
      cells.push_back({std::string(layer) + "*",
                       fmt::format("{} params, {} elements", j - i, group_digits(elements)),
                       where(first)});
    } else {
      cells.push_back({first.name, shape_text(place(first).shape), where(first)});
    }
    i = j;
  }
  std::size_t widths[2] = {0, 0};
  for (const auto& row : cells) {
    widths[0] = std::max(widths[0], row[0].size());
    widths[1] = std::max(widths[1], row[1].size());
  }
  std::vector<std::string> rows;
  for (const auto& row : cells) {
    rows.push_back(
        fmt::format("  {:<{}}  {:<{}}  {}", row[0], widths[0], row[1], widths[1], row[2]));
  }
  return rows;
}

void print_model(const JobDiff& d, std::size_t limit) {
  const bool params = !d.params.empty();
  if (!d.config.differs() && !params) return;
  fmt::print("\nmodel:\n");
  print_config(d.config, limit);
  if (!params) return;
  const struct {
    const char* title;
    bool (*keep)(const JobParamChange&);
  } kinds[] = {
      {"resized", [](const JobParamChange& c) { return c.resized; }},
      {"added", [](const JobParamChange& c) { return !c.before; }},
      {"removed", [](const JobParamChange& c) { return !c.after; }},
      {"moved to another chunk", [](const JobParamChange& c) { return c.moved && !c.resized; }},
  };
  for (const auto& kind : kinds) {
    const std::vector<std::string> rows = param_rows(d, kind.keep);
    if (rows.empty()) continue;
    std::size_t n = 0;
    for (const JobParamChange& c : d.params) n += kind.keep(c) ? 1 : 0;
    fmt::print("  params {} ({}):\n", kind.title, n);
    print_rows(rows, limit);
  }
}

/// The launch's Hugging Face config as the job was planned (its copy in the job directory),
/// else as read now from its recorded path, for diff_jobs.
void read_config(const LoadedJob& job, std::uint64_t max_bytes, std::string& text,
                 JobDiffInput& input) {
  const JobRecord& r = job.job.record;
  if (!r.launch || !r.launch->hf_config) return;
  if (job.config_copy) {
    input.config_text = *job.config_copy;
    return;
  }
  for (const LaunchFile& f : r.launch->files) {
    if (f.given != *r.launch->hf_config) continue;
    Result<std::string> read = read_file((job.job.dir / f.path).string(), max_bytes);
    if (!read) {
      input.config_problem = read.error().message;
      return;
    }
    text = std::move(*read);
    input.config_text = text;
    return;
  }
}

JobDiffInput input_of(const LoadedJob& job) {
  JobDiffInput in;
  in.record = &job.job.record;
  for (const JobChunkInput& c : job.chunks) in.chunks.push_back({c.record, &c.manifest, &c.layout});
  return in;
}

const std::string* config_sha(const JobRecord& r) {
  if (!r.launch || !r.launch->hf_config) return nullptr;
  for (const LaunchFile& f : r.launch->files) {
    if (f.given == *r.launch->hf_config) return &f.sha256;
  }
  return nullptr;
}

Result<LoadedJob> load_as_recorded(const std::string& path, std::uint64_t max_bytes) {
  Result<LoadedJob> job = load_job(path, max_bytes);
  if (!job) return job.error();
  if (Result<void> whole = require_as_recorded(*job); !whole) return whole.error();
  return job;
}

}  // namespace

Result<ExitCode> run_job_diff(const DiffCommand& command) {
  Result<LoadedJob> before = load_as_recorded(command.old_layout, command.max_input);
  if (!before) return before.error();
  Result<LoadedJob> after = load_as_recorded(command.new_layout, command.max_input);
  if (!after) return after.error();
  JobDiffInput old_input = input_of(*before);
  JobDiffInput new_input = input_of(*after);
  std::string old_config;
  std::string new_config;
  const std::string* old_sha = config_sha(before->job.record);
  const std::string* new_sha = config_sha(after->job.record);
  if (old_sha && new_sha && *old_sha != *new_sha) {
    read_config(*before, command.max_input, old_config, old_input);
    read_config(*after, command.max_input, new_config, new_input);
  }
  const Result<JobDiff> diff = diff_jobs(old_input, new_input);
  if (!diff) return diff.error();
  const JobDiff& d = *diff;
  if (command.json) {
    fmt::print("{}", job_diff_to_json(d));
    return d.identical() ? kExitOk : kExitWrong;
  }
  fmt::print("{}\n", d.verdict());
  if (d.generator_before != d.generator_after) {
    fmt::print("written by {} (old) and {} (new)\n", excerpt(d.generator_before),
               excerpt(d.generator_after));
  }
  if (d.identical()) return kExitOk;
  print_options(d, command.limit);
  print_launch(d, command.limit);
  print_model(d, command.limit);
  print_job_chunks(d, command.limit);
  return kExitWrong;
}

std::string change(const std::string& before, const std::string& after) {
  return before == after ? before : before + " -> " + after;
}

std::string diff_value_text(const std::string& json) {
  if (json == "null") return "none";
  if (json.size() >= 2 && json.front() == '"' && json.back() == '"' &&
      json.find('\\') == std::string::npos) {
    return json.substr(1, json.size() - 2);
  }
  const bool integer =
      !json.empty() && json.size() < 19 &&
      json.find_first_not_of("0123456789", json[0] == '-' ? 1 : 0) == std::string::npos &&
      json != "-";
  return integer ? group_digits(std::stoll(json)) : json;
}

}  // namespace paramlayout::cli
