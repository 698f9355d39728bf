// A job diff summed up: its counts, its one-line verdict, and the JSON of `diff --json`.
#include <fmt/format.h>

#include <algorithm>

#include "figures_json.hpp"
#include "paramlayout/job_diff.hpp"

namespace paramlayout {
namespace {

std::size_t count_params(const std::vector<JobParamChange>& params,
                         bool (*keep)(const JobParamChange&)) {
  return static_cast<std::size_t>(std::count_if(params.begin(), params.end(), keep));
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

void write_strings(json::Writer& w, const std::vector<std::string>& values) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) w.raw(i > 0 ? ", " : "").quoted(values[i]);
  w.raw("]");
}

void write_integers(json::Writer& w, const std::vector<std::int64_t>& values) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) w.raw(i > 0 ? ", " : "").integer(values[i]);
  w.raw("]");
}

void write_place(json::Writer& w, const std::optional<JobParamPlace>& p) {
  if (!p) {
    w.raw("null");
    return;
  }
  w.raw("{\"chunk\": ").quoted(fmt::format("stage{}.chunk{}", p->stage, p->chunk));
  w.raw(", \"shape\": ");
  write_integers(w, p->shape);
  w.raw(", \"numel\": ").integer(p->numel).raw("}");
}

/// job.json's entry for a chunk, the figures people compare.
void write_entry(json::Writer& w, const JobRecordChunk* c) {
  if (c == nullptr) {
    w.raw("null");
    return;
  }
  w.raw("{\"layers\": ");
  write_integers(w, c->layers);
  w.raw(", \"mtp_layers\": ");
  write_integers(w, c->mtp_layers);
  w.raw(", \"embedding\": ").boolean(c->embedding).raw(", \"output\": ").boolean(c->output);
  w.raw(", \"bucket_size\": ").optional(c->bucket_size);
  w.raw(", \"param_elements\": ").integer(c->param_elements).raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, c->bytes_per_rank);
  w.raw("}");
}

/// The param changes `keep` selects, as `"key": [...]`.
void write_param_list(json::Writer& w, const JobDiff& d, std::string_view key,
                      bool (*keep)(const JobParamChange&)) {
  w.raw("\n    \"").raw(key).raw("\": [");
  const char* sep = "\n      ";
  for (const JobParamChange& c : d.params) {
    if (!keep(c)) continue;
    w.raw(sep).raw("{\"name\": ").quoted(c.name).raw(", \"before\": ");
    write_place(w, c.before);
    w.raw(", \"after\": ");
    write_place(w, c.after);
    w.raw("}");
    sep = ",\n      ";
  }
  w.raw(*sep == ',' ? "\n    ]" : "]");
}

bool added(const JobParamChange& c) { return !c.before; }
bool removed(const JobParamChange& c) { return !c.after; }
bool resized(const JobParamChange& c) { return c.resized; }
bool moved(const JobParamChange& c) { return c.moved; }

void write_params(json::Writer& w, const JobDiff& d) {
  w.raw(",\n  \"params\": {");
  write_param_list(w, d, "added", added);
  w.raw(",");
  write_param_list(w, d, "removed", removed);
  w.raw(",");
  write_param_list(w, d, "resized", resized);
  w.raw(",");
  write_param_list(w, d, "moved", moved);
  w.raw("\n  }");
}

void write_config(json::Writer& w, const ConfigDiff& c) {
  w.raw(",\n  \"config\": {\"before\": ").optional(c.before_given);
  w.raw(", \"after\": ").optional(c.after_given);
  w.raw(", \"differs\": ").boolean(c.differs()).raw(", \"compared\": ").boolean(c.compared);
  w.raw(", \"not_compared\": ");
  if (c.not_compared.empty()) {
    w.raw("null");
  } else {
    w.quoted(c.not_compared);
  }
  w.raw(", \"fields\": [");
  for (std::size_t i = 0; i < c.fields.size(); ++i) {
    const ConfigFieldChange& f = c.fields[i];
    w.raw(i > 0 ? ",\n    " : "\n    ").raw("{\"key\": ").quoted(f.key);
    w.raw(", \"before\": ").raw(f.before ? *f.before : "null");
    w.raw(", \"after\": ").raw(f.after ? *f.after : "null").raw("}");
  }
  w.raw(c.fields.empty() ? "]}" : "\n  ]}");
}

void write_launch(json::Writer& w, const JobDiff& d) {
  w.raw(",\n  \"launch\": {\"before_recorded\": ").boolean(d.before_has_launch);
  w.raw(", \"after_recorded\": ").boolean(d.after_has_launch).raw(", \"arguments\": [");
  for (std::size_t i = 0; i < d.arguments.size(); ++i) {
    const ArgumentChange& a = d.arguments[i];
    w.raw(i > 0 ? ",\n    " : "\n    ").raw("{\"argument\": ").quoted(a.argument);
    w.raw(", \"before\": ").optional(a.before).raw(", \"after\": ").optional(a.after).raw("}");
  }
  w.raw(d.arguments.empty() ? "]" : "\n  ]").raw(", \"files\": [");
  for (std::size_t i = 0; i < d.files.size(); ++i) {
    const LaunchFileChange& f = d.files[i];
    w.raw(i > 0 ? ", " : "").raw("{\"given\": ").quoted(f.given);
    w.raw(", \"sha256\": ").quoted(f.sha256).raw(", \"added\": ").boolean(f.added).raw("}");
  }
  w.raw("]}");
}

void write_chunks(json::Writer& w, const JobDiff& d) {
  w.raw(",\n  \"chunks\": [");
  const char* sep = "\n    ";
  for (const JobChunkDiff& c : d.chunks) {
    const char* status = c.before == nullptr  ? "added"
                         : c.after == nullptr ? "removed"
                         : c.identical        ? "identical"
                                              : "differs";
    w.raw(sep).raw("{\"chunk\": ").quoted(c.name()).raw(", \"stage\": ").integer(c.stage);
    w.raw(", \"index\": ").integer(c.chunk).raw(", \"status\": ").quoted(status);
    w.raw(",\n     \"before\": ");
    write_entry(w, c.before);
    w.raw(",\n     \"after\": ");
    write_entry(w, c.after);
    w.raw(",\n     \"params\": {\"added\": ").integer(static_cast<std::int64_t>(c.params_added));
    w.raw(", \"removed\": ").integer(static_cast<std::int64_t>(c.params_removed));
    w.raw(", \"resized\": ").integer(static_cast<std::int64_t>(c.params_resized));
    w.raw(", \"moved_in\": ").integer(static_cast<std::int64_t>(c.params_moved_in));
    w.raw(", \"moved_out\": ").integer(static_cast<std::int64_t>(c.params_moved_out)).raw("}");
    w.raw(", \"buckets_moved\": ").integer(static_cast<std::int64_t>(c.buckets_moved));
    w.raw(",\n     \"layout\": ");
    if (c.layout && !c.identical) {
      std::string layout = diff_to_json(*c.layout);
      while (!layout.empty() && layout.back() == '\n') layout.pop_back();
      w.raw(layout);
    } else {
      w.raw("null");
    }
    w.raw("}");
    sep = ",\n    ";
  }
  w.raw(d.chunks.empty() ? "]" : "\n  ]");
}

}  // namespace

std::size_t JobDiff::params_added() const { return count_params(params, added); }
std::size_t JobDiff::params_removed() const { return count_params(params, removed); }
std::size_t JobDiff::params_resized() const { return count_params(params, resized); }
std::size_t JobDiff::params_moved() const { return count_params(params, moved); }

std::size_t JobDiff::chunks_differing() const {
  return static_cast<std::size_t>(std::count_if(chunks.begin(), chunks.end(), [](const auto& c) {
    return c.before == nullptr || c.after == nullptr || !c.identical;
  }));
}

bool JobDiff::peak_differs() const {
  if (!peak_before || !peak_after) return false;
  const RankMemory& a = *peak_before;
  const RankMemory& b = *peak_after;
  return a.stage != b.stage || a.peak_bytes != b.peak_bytes ||
         a.persistent_bytes != b.persistent_bytes || a.activation_bytes != b.activation_bytes;
}

bool JobDiff::heaviest_differs() const {
  return heaviest_stage_before != heaviest_stage_after ||
         heaviest_bytes_before != heaviest_bytes_after;
}

bool JobDiff::identical() const { return !records_differ && chunks_differing() == 0; }

std::string JobDiff::verdict() const {
  if (identical()) return "identical";
  std::vector<std::string> parts;
  if (!options.empty()) {
    std::vector<std::string_view> names;
    for (const OptionChange& o : options) names.push_back(o.name);
    parts.push_back(fmt::format("options changed: {}", fmt::join(names, ", ")));
  }
  if (before_has_launch != after_has_launch) {
    parts.push_back(before_has_launch ? "only the old job records its launch"
                                      : "only the new job records its launch");
  }
  if (!arguments.empty()) {
    parts.push_back(plural(arguments.size(), "launch argument", "launch arguments") + " changed");
  }
  if (!files.empty()) parts.push_back(plural(files.size(), "file read", "files read") + " differ");
  if (config.differs()) {
    if (config.compared) {
      parts.push_back(fmt::format("config: {} differ{}",
                                  plural(config.fields.size(), "field", "fields"),
                                  config.fields.size() == 1 ? "s" : ""));
    } else {
      parts.push_back("config differs");
    }
  }
  if (!ignored_added.empty() || !ignored_removed.empty()) {
    parts.push_back("ignored arguments changed");
  }
  std::vector<std::string> counts;
  const auto count = [&](std::size_t n, std::string_view what) {
    if (n > 0) counts.push_back(fmt::format("{} {}", n, what));
  };
  count(params_added(), "added");
  count(params_removed(), "removed");
  count(params_resized(), "resized");
  count(params_moved(), "moved to another chunk");
  if (!counts.empty()) parts.push_back(fmt::format("params: {}", fmt::join(counts, ", ")));
  const std::size_t differing = chunks_differing();
  if (differing > 0) {
    parts.push_back(fmt::format("{} of {} chunk{} differ{}", differing, chunks.size(),
                                chunks.size() == 1 ? "" : "s", differing == 1 ? "s" : ""));
  }
  if (parts.empty()) {
    const bool notes = !notes_added.empty() || !notes_removed.empty();
    parts.emplace_back(notes ? "notes differ" : "job.json differs");
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string job_diff_to_json(const JobDiff& d) {
  std::string text;
  json::Writer w(text);
  w.raw("{\n  \"identical\": ")
      .boolean(d.identical())
      .raw(",\n  \"verdict\": ")
      .quoted(d.verdict());
  w.raw(",\n  \"generator\": {\"before\": ").quoted(d.generator_before);
  w.raw(", \"after\": ").quoted(d.generator_after).raw("}");
  w.raw(",\n  \"options\": [");
  for (std::size_t i = 0; i < d.options.size(); ++i) {
    const OptionChange& o = d.options[i];
    w.raw(i > 0 ? ", " : "").raw("{\"option\": ").quoted(o.name);
    w.raw(", \"before\": ").raw(o.before).raw(", \"after\": ").raw(o.after).raw("}");
  }
  w.raw("]");
  w.raw(",\n  \"heaviest_stage\": {\"before\": {\"stage\": ").integer(d.heaviest_stage_before);
  w.raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, d.heaviest_bytes_before);
  w.raw("}, \"after\": {\"stage\": ").integer(d.heaviest_stage_after).raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, d.heaviest_bytes_after);
  w.raw("}}");
  const auto peak = [&](const std::optional<RankMemory>& m) {
    if (!m) {
      w.raw("null");
      return;
    }
    w.raw("{\"stage\": ").integer(m->stage);
    w.raw(", \"persistent_bytes\": ").integer(m->persistent_bytes);
    w.raw(", \"activation_bytes\": ").integer(m->activation_bytes);
    w.raw(", \"peak_bytes\": ").integer(m->peak_bytes).raw("}");
  };
  w.raw(",\n  \"heaviest_peak\": {\"before\": ");
  peak(d.peak_before);
  w.raw(", \"after\": ");
  peak(d.peak_after);
  w.raw("}");
  write_launch(w, d);
  w.raw(",\n  \"ignored_arguments\": {\"added\": ");
  write_strings(w, d.ignored_added);
  w.raw(", \"removed\": ");
  write_strings(w, d.ignored_removed);
  w.raw("},\n  \"notes\": {\"added\": ");
  write_strings(w, d.notes_added);
  w.raw(", \"removed\": ");
  write_strings(w, d.notes_removed);
  w.raw("}");
  write_config(w, d.config);
  write_params(w, d);
  write_chunks(w, d);
  w.raw("\n}\n");
  return text;
}

}  // namespace paramlayout
