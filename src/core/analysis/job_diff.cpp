// Two jobs compared: job.json's figures and launch, the params of the whole model, and each
// (stage, chunk) pair's layouts through diff_layouts.
#include "paramlayout/job_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "format/json_writer.hpp"

namespace paramlayout {
namespace {

using ChunkKey = std::pair<std::int64_t, std::int64_t>;

std::string quoted(std::string_view text) {
  std::string out;
  json::Writer(out).quoted(text);
  return out;
}

void option(std::vector<OptionChange>& out, std::string_view name, std::string before,
            std::string after) {
  if (before != after) out.push_back({name, std::move(before), std::move(after)});
}

void integer_option(std::vector<OptionChange>& out, std::string_view name, std::int64_t before,
                    std::int64_t after) {
  option(out, name, std::to_string(before), std::to_string(after));
}

std::vector<OptionChange> option_changes(const JobRecord& a, const JobRecord& b) {
  std::vector<OptionChange> out;
  option(out, "model", quoted(a.model), quoted(b.model));
  integer_option(out, "world_size", a.world_size, b.world_size);
  integer_option(out, "dp", a.dp, b.dp);
  integer_option(out, "expert_dp", a.expert_dp, b.expert_dp);
  integer_option(out, "tp", a.parallel.tp, b.parallel.tp);
  integer_option(out, "pp", a.parallel.pp, b.parallel.pp);
  integer_option(out, "vpp", a.parallel.vpp, b.parallel.vpp);
  integer_option(out, "cp", a.parallel.cp, b.parallel.cp);
  integer_option(out, "ep", a.parallel.ep, b.parallel.ep);
  integer_option(out, "etp", a.parallel.etp, b.parallel.etp);
  option(out, "strategy", quoted(to_string(a.strategy)), quoted(to_string(b.strategy)));
  option(out, "packer", quoted(to_string(a.packer)), quoted(to_string(b.packer)));
  option(out, "param_dtype", quoted(to_string(a.param_dtype)), quoted(to_string(b.param_dtype)));
  option(out, "grad_dtype", quoted(to_string(a.grad_dtype)), quoted(to_string(b.grad_dtype)));
  integer_option(out, "dense_shards", a.dense_shards, b.dense_shards);
  integer_option(out, "expert_shards", a.expert_shards, b.expert_shards);
  return out;
}

/// Strings in `b` that `a` lacks, in `b`'s order.
std::vector<std::string> missing_from(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& s : b) {
    if (std::find(a.begin(), a.end(), s) == a.end()) out.push_back(s);
  }
  return out;
}

const LaunchFile* config_file(const JobRecord& r) {
  if (!r.launch || !r.launch->hf_config) return nullptr;
  for (const LaunchFile& f : r.launch->files) {
    if (f.given == *r.launch->hf_config) return &f;
  }
  return nullptr;
}

/// The files the launch read but its config.
std::vector<const LaunchFile*> other_files(const JobRecord& r) {
  std::vector<const LaunchFile*> out;
  if (!r.launch) return out;
  const LaunchFile* config = config_file(r);
  for (const LaunchFile& f : r.launch->files) {
    if (&f != config) out.push_back(&f);
  }
  return out;
}

/// Files of `b` whose bytes `a` did not read (each of `a`'s matches one of `b`'s at most).
void files_only_in(const JobRecord& a, const JobRecord& b, bool added,
                   std::vector<LaunchFileChange>& out) {
  std::vector<const LaunchFile*> pool = other_files(a);
  for (const LaunchFile* f : other_files(b)) {
    auto it = std::find_if(pool.begin(), pool.end(),
                           [&](const LaunchFile* p) { return p->sha256 == f->sha256; });
    if (it != pool.end()) {
      pool.erase(it);
    } else {
      out.push_back({f->given, f->sha256, added});
    }
  }
}

/// The config's bytes as read now, or why they cannot be compared.
std::optional<std::string_view> config_as_recorded(const JobDiffInput& in, std::string_view job,
                                                   const std::string& given,
                                                   const std::string& sha256,
                                                   std::vector<std::string>& problems) {
  if (!in.config_text) {
    problems.push_back(in.config_problem.empty() ? given + ": not read" : in.config_problem);
    return std::nullopt;
  }
  const std::string actual = sha256_hex(*in.config_text);
  if (actual != sha256) {
    problems.push_back(
        fmt::format("the {} job's {} changed since it was planned (SHA-256 {}, "
                    "job.json records {})",
                    job, given, actual.substr(0, 12), sha256.substr(0, 12)));
    return std::nullopt;
  }
  return in.config_text;
}

ConfigDiff config_diff(const JobDiffInput& before, const JobDiffInput& after) {
  ConfigDiff c;
  if (!before.record->launch || !after.record->launch) return c;  // nothing to compare with
  const LaunchFile* was = config_file(*before.record);
  const LaunchFile* now = config_file(*after.record);
  if (was) {
    c.before_given = was->given;
    c.before_sha256 = was->sha256;
  }
  if (now) {
    c.after_given = now->given;
    c.after_sha256 = now->sha256;
  }
  if (!was || !now || !c.differs()) return c;
  std::vector<std::string> problems;
  const auto old_text = config_as_recorded(before, "old", was->given, was->sha256, problems);
  const auto new_text = config_as_recorded(after, "new", now->given, now->sha256, problems);
  if (!problems.empty()) {
    c.not_compared = fmt::format("{}", fmt::join(problems, "; "));
    return c;
  }
  Result<std::vector<ConfigFieldChange>> fields =
      diff_json_fields(*old_text, was->given, *new_text, now->given);
  if (!fields) {
    c.not_compared = fields.error().message;
    return c;
  }
  c.fields = std::move(*fields);
  c.compared = true;
  return c;
}

/// job.json as diff_jobs holds it: the generator, file hashes and file paths aside (a file is
/// the same file where its bytes are; the chunk files are compared themselves).
JobRecord normalized(JobRecord r) {
  r.generator.clear();
  for (JobRecordChunk& c : r.chunks) {
    c.manifest_sha256.clear();
    c.layout_sha256.clear();
  }
  if (r.launch) {
    if (r.launch->hf_config) r.launch->hf_config = "";
    for (LaunchFile& f : r.launch->files) {
      f.given.clear();
      f.path.clear();
    }
    std::sort(r.launch->files.begin(), r.launch->files.end(),
              [](const LaunchFile& x, const LaunchFile& y) { return x.sha256 < y.sha256; });
  }
  return r;
}

/// A chunk's `decoder.layers.I.` named as the whole model numbers it: `layers[I]`.
std::string job_param_name(std::string_view local, const JobRecordChunk& c) {
  constexpr std::string_view kLayers = "decoder.layers.";
  if (local.substr(0, kLayers.size()) != kLayers) return std::string(local);
  std::size_t i = kLayers.size();
  std::size_t index = 0;
  const std::size_t first = i;
  while (i < local.size() && local[i] >= '0' && local[i] <= '9' && i - first < 9) {
    index = index * 10 + static_cast<std::size_t>(local[i] - '0');
    ++i;
  }
  if (i == first || i >= local.size() || local[i] != '.' || index >= c.layers.size()) {
    return std::string(local);
  }
  return fmt::format("{}{}{}", kLayers, c.layers[index], local.substr(i));
}

struct Occurrence {
  const JobRecordChunk* chunk;
  const Param* param;
};

JobParamPlace place(const Occurrence& o) {
  return {o.chunk->stage, o.chunk->chunk, o.param->shape, o.param->numel};
}

bool same_chunk(const Occurrence& a, const Occurrence& b) {
  return a.chunk->stage == b.chunk->stage && a.chunk->chunk == b.chunk->chunk;
}

/// Params matched by their name in the whole model; one that is in several chunks (the
/// embedding's copies) is matched chunk by chunk first, then in order.
std::vector<JobParamChange> param_changes(const JobDiffInput& before, const JobDiffInput& after) {
  struct Occurrences {
    std::vector<Occurrence> before, after;
  };
  std::vector<std::string> order;
  std::unordered_map<std::string, Occurrences> by_name;
  const auto collect = [&](const JobDiffInput& in, bool is_after) {
    for (const JobDiffChunk& c : in.chunks) {
      for (const Param& p : c.manifest->params) {
        std::string name = job_param_name(p.name, *c.record);
        auto [it, added] = by_name.try_emplace(name);
        if (added) order.push_back(std::move(name));
        (is_after ? it->second.after : it->second.before).push_back({c.record, &p});
      }
    }
  };
  collect(after, true);
  collect(before, false);
  std::vector<JobParamChange> out;
  for (const std::string& name : order) {
    Occurrences& o = by_name.at(name);
    std::vector<bool> used(o.before.size(), false);
    std::vector<std::pair<const Occurrence*, const Occurrence*>> pairs;  // (before, after)
    std::vector<const Occurrence*> unpaired;
    for (const Occurrence& a : o.after) {
      std::size_t i = 0;
      while (i < o.before.size() && (used[i] || !same_chunk(o.before[i], a))) ++i;
      if (i < o.before.size()) {
        used[i] = true;
        pairs.emplace_back(&o.before[i], &a);
      } else {
        unpaired.push_back(&a);
      }
    }
    std::size_t next = 0;
    for (const Occurrence* a : unpaired) {
      while (next < used.size() && used[next]) ++next;
      if (next < used.size()) {
        used[next] = true;
        pairs.emplace_back(&o.before[next], a);
      } else {
        out.push_back({name, std::nullopt, place(*a)});
      }
    }
    for (const auto& [b, a] : pairs) {
      JobParamChange c{name, place(*b), place(*a)};
      c.resized = b->param->shape != a->param->shape;
      c.moved = !same_chunk(*b, *a);
      if (c.resized || c.moved) out.push_back(std::move(c));
    }
    for (std::size_t i = 0; i < used.size(); ++i) {
      if (!used[i]) out.push_back({name, place(o.before[i]), std::nullopt});
    }
  }
  return out;
}

bool same_entry(JobRecordChunk a, JobRecordChunk b) {
  a.manifest_sha256.clear();
  a.layout_sha256.clear();
  b.manifest_sha256.clear();
  b.layout_sha256.clear();
  return a == b;
}

/// Buckets of `after` whose [start, end) the buffer of the same key in `before` lacks.
std::size_t buckets_moved(const Layout& before, const Layout& after) {
  std::size_t moved = 0;
  for (const BufferLayout& b : after.buffers) {
    auto old = std::find_if(before.buffers.begin(), before.buffers.end(),
                            [&](const BufferLayout& o) { return o.key == b.key; });
    for (const BucketRange& bucket : b.buckets) {
      const bool kept = old != before.buffers.end() &&
                        std::any_of(old->buckets.begin(), old->buckets.end(), [&](const auto& o) {
                          return o.start == bucket.start && o.end == bucket.end;
                        });
      moved += kept ? 0 : 1;
    }
  }
  return moved;
}

Result<void> compare_chunk(const JobDiffChunk& was, const JobDiffChunk& now, JobChunkDiff& out) {
  Result<LayoutDiff> layout = diff_layouts(*was.layout, *now.layout);
  if (!layout) return Error{out.name() + ": " + layout.error().message};
  const Layout& a = *was.layout;
  const Layout& b = *now.layout;
  out.identical = layout->identical() && same_entry(*was.record, *now.record) &&
                  was.manifest->sha256 == now.manifest->sha256 && a.model == b.model &&
                  a.manifest_sha256 == b.manifest_sha256 && a.recorded_stats == b.recorded_stats;
  out.layout = std::move(*layout);
  out.buckets_moved = buckets_moved(a, b);
  for (const BufferLayout& buffer : b.buffers) out.buckets_after += buffer.buckets.size();
  return {};
}

}  // namespace

std::string JobChunkDiff::name() const { return fmt::format("stage{}.chunk{}", stage, chunk); }

Result<JobDiff> diff_jobs(const JobDiffInput& before, const JobDiffInput& after) {
  const JobRecord& a = *before.record;
  const JobRecord& b = *after.record;
  JobDiff d;
  d.generator_before = a.generator;
  d.generator_after = b.generator;
  d.options = option_changes(a, b);
  d.heaviest_stage_before = a.heaviest_stage;
  d.heaviest_stage_after = b.heaviest_stage;
  d.heaviest_bytes_before = a.heaviest_stage_bytes;
  d.heaviest_bytes_after = b.heaviest_stage_bytes;
  const auto peak = [](const JobRecord& r) -> std::optional<RankMemory> {
    if (r.memory.empty()) return std::nullopt;
    return r.memory[static_cast<std::size_t>(heaviest_peak_stage(r.memory))];
  };
  d.peak_before = peak(a);
  d.peak_after = peak(b);
  d.before_has_launch = a.launch.has_value();
  d.after_has_launch = b.launch.has_value();
  if (a.launch && b.launch) {
    d.arguments = diff_arguments(a.launch->args, b.launch->args);
    files_only_in(b, a, false, d.files);
    files_only_in(a, b, true, d.files);
  }
  d.ignored_added = missing_from(a.ignored_arguments, b.ignored_arguments);
  d.ignored_removed = missing_from(b.ignored_arguments, a.ignored_arguments);
  d.notes_added = missing_from(a.notes, b.notes);
  d.notes_removed = missing_from(b.notes, a.notes);
  d.config = config_diff(before, after);
  d.records_differ = normalized(a) != normalized(b);
  d.params = param_changes(before, after);

  std::map<ChunkKey, std::pair<const JobDiffChunk*, const JobDiffChunk*>> pairs;
  for (const JobDiffChunk& c : before.chunks) pairs[{c.record->stage, c.record->chunk}].first = &c;
  for (const JobDiffChunk& c : after.chunks) pairs[{c.record->stage, c.record->chunk}].second = &c;
  std::map<ChunkKey, std::size_t> index;
  for (const auto& [key, pair] : pairs) {
    JobChunkDiff& c = d.chunks.emplace_back();
    c.stage = key.first;
    c.chunk = key.second;
    c.before = pair.first ? pair.first->record : nullptr;
    c.after = pair.second ? pair.second->record : nullptr;
    if (pair.first && pair.second) {
      if (Result<void> done = compare_chunk(*pair.first, *pair.second, c); !done) {
        return done.error();
      }
    }
    index[key] = d.chunks.size() - 1;
  }
  const auto at = [&](const JobParamPlace& p) -> JobChunkDiff& {
    return d.chunks[index.at({p.stage, p.chunk})];
  };
  for (const JobParamChange& c : d.params) {
    if (!c.before) ++at(*c.after).params_added;
    if (!c.after) ++at(*c.before).params_removed;
    if (c.resized) ++at(*c.after).params_resized;
    if (c.moved) ++at(*c.after).params_moved_in, ++at(*c.before).params_moved_out;
  }
  return d;
}

}  // namespace paramlayout
