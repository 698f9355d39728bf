// paramlayout check JOB: every chunk keeps every promise, job.json agrees with its files, and
// with --replan, the recorded launch still plans exactly these files.
#include "check_job.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "inputs.hpp"
#include "io.hpp"
#include "job_directory.hpp"
#include "job_input.hpp"
#include "launch.hpp"
#include "paramlayout/check_job.hpp"
#include "paramlayout/ddp_log.hpp"
#include "paramlayout/diff.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/text.hpp"
#include "paramlayout/version.hpp"

namespace paramlayout::cli {
namespace {

namespace fs = std::filesystem;

/// `text` with its first `"generator": "..."` value blanked: files written by two versions
/// of paramlayout compare equal when nothing else differs.
std::string without_generator(std::string_view text) {
  static const std::regex kGenerator(R"re("generator": "[^"]*")re");
  return std::regex_replace(std::string(text), kGenerator, "\"generator\": \"\"",
                            std::regex_constants::format_first_only);
}

/// The first line where `before` and `after` differ, for a message.
std::string first_difference(std::string_view before, std::string_view after) {
  std::size_t line = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i < std::min(before.size(), after.size()); ++i) {
    if (before[i] != after[i]) break;
    if (before[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  auto line_at = [&](std::string_view text) {
    const std::string_view rest = text.substr(std::min(start, text.size()));
    return excerpt(rest.substr(0, rest.find('\n')), 80);
  };
  return fmt::format("line {}: {} now, was {}", line, line_at(after), line_at(before));
}

/// "2 params added (a, b), 1 resized (c)": how a chunk's params changed, by name.
std::string param_changes(const Manifest& before, const Manifest& after) {
  std::map<std::string_view, const Param*> old;
  for (const Param& p : before.params) old.emplace(p.name, &p);
  std::vector<std::string_view> added, resized, removed;
  for (const Param& p : after.params) {
    const auto it = old.find(p.name);
    if (it == old.end()) {
      added.push_back(p.name);
    } else {
      if (it->second->shape != p.shape || it->second->dtype != p.dtype) resized.push_back(p.name);
      old.erase(it);
    }
  }
  for (const auto& [name, param] : old) removed.push_back(name);
  std::vector<std::string> parts;
  for (const auto& [what, names] : {std::pair{"added", &added}, std::pair{"removed", &removed},
                                    std::pair{"changed shape or dtype", &resized}}) {
    if (names->empty()) continue;
    parts.push_back(fmt::format("{} param{} {} ({}{})", names->size(),
                                names->size() == 1 ? "" : "s", what, names->front(),
                                names->size() > 1 ? ", ..." : ""));
  }
  return parts.empty() ? std::string("the same params, written differently")
                       : fmt::format("{}", fmt::join(parts, ", "));
}

/// Job chunk files in the directory that job.json does not name: left from another job.
std::vector<Violation> strangers(const LoadedJob& job) {
  std::set<std::string> named;
  for (const JobRecordChunk& c : job.job.record.chunks) {
    named.insert(c.manifest);
    named.insert(c.layout);
  }
  if (job.job.record.launch) {
    for (const LaunchFile& f : job.job.record.launch->files) {
      if (!f.copy.empty()) named.insert(f.copy);
    }
  }
  std::vector<Violation> out;
  std::error_code ec;
  std::set<std::string> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(job.job.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "job.json" && is_job_file_name(name) && !named.contains(name)) found.insert(name);
  }
  for (const std::string& name : found) {
    out.push_back({name, name == kConfigCopy
                             ? "a config's copy job.json does not name: left from another job?"
                             : "a chunk file job.json does not name: left from another job?"});
  }
  return out;
}

/// What the recorded launch gives today, against the job's files.
Result<std::vector<Violation>> compare_with_launch(const LoadedJob& job) {
  const JobRecord& record = job.job.record;
  if (!record.launch) {
    return Error{
        fmt::format("{}: --replan needs the launch job.json records, and this one "
                    "records none (written by {}); plan it again with `paramlayout "
                    "job ... -o DIR`",
                    job.job.json_path, record.generator)};
  }
  Result<PlannedLaunch> planned = plan_launch(*record.launch, job.job.dir);
  if (!planned) return Error{"--replan: " + planned.error().message};
  std::vector<Violation> out;
  for (std::string& change : changed_files(*record.launch, planned->files)) {
    out.push_back({"launch", std::move(change)});
  }
  const std::size_t changed = out.size();
  // The recorded launch, as recorded: a file whose hash changed is reported above, once.
  const std::vector<JobFile> fresh = job_files(planned->spec, planned->plan, record.launch);
  std::set<std::string> compared;
  for (const JobChunkInput& c : job.chunks) {
    for (const auto& [name, text] : {std::pair{c.record->manifest, &c.manifest_text},
                                     std::pair{c.record->layout, &c.layout_text}}) {
      compared.insert(name);
      const auto same_name = [&](const JobFile& f) { return f.name == name; };
      const auto now = std::find_if(fresh.begin(), fresh.end(), same_name);
      if (now == fresh.end()) {
        out.push_back({c.record->name(), fmt::format("{}: the launch no longer makes it", name)});
        continue;
      }
      if (without_generator(*text) == without_generator(now->content)) continue;
      std::string what = fmt::format("{} differs from what the launch gives today", name);
      if (name == c.record->layout) {
        if (Result<Layout> replanned = parse_layout(now->content, name)) {
          if (Result<LayoutDiff> d = diff_layouts(c.layout, *replanned))
            what += ": " + d->verdict();
        }
      } else if (Result<Manifest> remade = parse_manifest(now->content, name)) {
        what += ": " + param_changes(c.manifest, *remade);
      }
      out.push_back({c.record->name(), what});
    }
  }
  for (const JobFile& f : fresh) {
    if (f.name == "job.json" || compared.contains(f.name)) continue;
    out.push_back({"job.json", fmt::format("the launch now also makes {}", f.name)});
  }
  const std::string recorded = write_job_json(record);
  if (without_generator(recorded) != without_generator(fresh.back().content)) {
    out.push_back({"job.json", "differs from what the launch gives today (" +
                                   first_difference(recorded, fresh.back().content) + ")"});
  }
  if (!out.empty() && out.size() == changed) {
    out.back().what += "; the job's files are still what the launch plans with it";
  }
  return out;
}

/// Every report in the logs; an error when a log cannot be read, cuts a report short, or
/// none of them holds a report.
Result<DdpLog> read_logs(const std::vector<std::string>& paths, std::uint64_t max_bytes) {
  DdpLog log;
  for (const std::string& path : paths) {
    Result<std::string> text = read_file(path, max_bytes);
    if (!text) return text.error();
    if (Result<void> read = read_ddp_log(*text, display_name(path), log); !read) {
      return read.error();
    }
  }
  if (log.buffers.empty() && log.param_counts.empty() && log.memory.empty()) {
    return Error{fmt::format(
        "{}: no report of Megatron-LM's DDP found: looked for \"Number of buckets for gradient "
        "all-reduce / reduce-scatter: N\" (param_and_grad_buffer.py, logged at INFO by each "
        "stage's first rank), \"number of parameters on (...) model parallel rank\" "
        "(training.py) and \"[Rank R] (after N iterations) memory (MB)\" (report_memory)",
        fmt::join(paths, ", "))};
  }
  return log;
}

/// "; the log agrees: 12 bucket reports (12 of 12 buffers), 4 param counts".
std::string log_line(const DdpLog& log, const LogComparison& c) {
  return fmt::format(
      "; the log agrees: {} bucket report{} ({} of {} buffers), {} param "
      "count{}",
      log.buffers.size(), log.buffers.size() == 1 ? "" : "s", c.buffers_reported, c.buffers,
      c.param_counts, c.param_counts == 1 ? "" : "s");
}

std::string holds_line(const LoadedJob& job, bool replanned) {
  std::size_t params = 0, buffers = 0, buckets = 0;
  for (const JobChunkInput& c : job.chunks) {
    params += c.manifest.params.size();
    buffers += c.layout.buffers.size();
    for (const BufferLayout& b : c.layout.buffers) buckets += b.buckets.size();
  }
  const auto counted = [](std::size_t n, std::string_view noun) {
    return fmt::format("{} {}{}", group_digits(static_cast<std::int64_t>(n)), noun,
                       n == 1 ? "" : "s");
  };
  return fmt::format(
      "{}: holds: {}, {} in {} and {} keep every promise, and job.json agrees "
      "with its files{}",
      job.job.json_path, counted(job.chunks.size(), "chunk"), counted(params, "param"),
      counted(buffers, "buffer"), counted(buckets, "bucket"),
      replanned ? "; the recorded launch plans the same job today" : "");
}

}  // namespace

Result<ExitCode> run_check_job(const CheckCommand& command) {
  if (Result<void> usage = layout_or_job_usage(true, command.layout, command.manifest); !usage) {
    return usage.error();
  }
  Result<LoadedJob> job = load_job(command.layout, command.max_input);
  if (!job) return job.error();
  std::vector<Violation> problems;
  for (const std::string& p : job->not_as_recorded) problems.push_back({"", p});
  for (Violation& v : strangers(*job)) problems.push_back(std::move(v));
  std::vector<JobChunkFiles> files;
  for (const JobChunkInput& c : job->chunks) {
    files.push_back({c.record, &c.manifest, &c.layout});
    std::vector<Violation> found = check_layout(c.layout, c.manifest);
    for (Violation& v : check_recorded_stats(c.layout, c.manifest)) found.push_back(std::move(v));
    for (Violation& v : found) problems.push_back({c.record->name(), v.message()});
  }
  for (Violation& v : check_job_record(job->job.record, files)) problems.push_back(std::move(v));
  std::string log_agrees;
  if (!command.against_log.empty()) {
    Result<DdpLog> log = read_logs(command.against_log, command.max_input);
    if (!log) return log.error();
    LogComparison compared = compare_with_log(job->job.record, files, *log);
    log_agrees = log_line(*log, compared);
    for (const std::string& note : compared.memory_notes) fmt::print("memory: {}\n", note);
    for (Violation& v : compared.differences) problems.push_back(std::move(v));
  }
  const std::string& written_by = job->job.record.generator;
  const std::string current = std::string("paramlayout ") + std::string(kVersion);
  if (command.replan) {
    Result<std::vector<Violation>> stale = compare_with_launch(*job);
    if (!stale) return stale.error();
    for (Violation& v : *stale) problems.push_back({v.where, "stale: " + v.what});
    if (written_by != current && !written_by.empty()) {
      fmt::print("{}: written by {}, replanned by {}\n", job->job.json_path, written_by, current);
    }
  }
  if (problems.empty()) {
    fmt::print("{}{}\n", holds_line(*job, command.replan), log_agrees);
    return kExitOk;
  }
  const std::size_t shown =
      command.limit == 0 ? problems.size() : std::min(command.limit, problems.size());
  for (std::size_t i = 0; i < shown; ++i) fmt::print("{}\n", problems[i].message());
  if (shown < problems.size()) {
    fmt::print("... and {} more (--limit 0 shows all)\n", problems.size() - shown);
  }
  fmt::print("{}: broken: {} problem{}\n", job->job.json_path, problems.size(),
             problems.size() == 1 ? "" : "s");
  return kExitWrong;
}

}  // namespace paramlayout::cli
