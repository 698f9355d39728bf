#include "paramlayout/check_job.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "paramlayout/stats.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout {
namespace {

class Findings {
 public:
  explicit Findings(std::vector<Violation>& out) : out_(out) {}

  /// Records "`what` is `recorded` in job.json, the files give `actual`" unless they agree.
  template <class T>
  void expect(const std::string& where, std::string_view what, const T& recorded, const T& actual) {
    if (recorded == actual) return;
    out_.push_back({where, fmt::format("{}records {} {}, its files give {}",
                                       where == "job.json" ? "" : "job.json ", what,
                                       shown(recorded), shown(actual))});
  }
  void add(const std::string& where, std::string what) { out_.push_back({where, std::move(what)}); }

 private:
  static std::string shown(std::int64_t n) { return group_digits(n); }
  static std::string shown(const std::string& s) { return s; }
  static std::string shown(const std::optional<std::int64_t>& n) {
    return n ? group_digits(*n) : std::string("none");
  }
  std::vector<Violation>& out_;
};

std::int64_t param_elements(const Manifest& manifest) {
  std::int64_t n = 0;
  for (const Param& p : manifest.params) n += p.numel;
  return n;
}

void check_sizes(const JobRecord& job, Findings& f) {
  const ParallelConfig& p = job.parallel;
  const std::int64_t dense_group = p.tp * p.pp * p.cp;
  const std::int64_t expert_group = p.etp * p.ep * p.pp;
  if (job.world_size % dense_group != 0 || job.world_size % expert_group != 0) {
    f.add("job.json", fmt::format("world size {} is not a multiple of tp x pp x cp = {} and "
                                  "etp x ep x pp = {}",
                                  job.world_size, dense_group, expert_group));
    return;
  }
  f.expect("job.json", "dp", job.dp, job.world_size / dense_group);
  f.expect("job.json", "expert dp", job.expert_dp, job.world_size / expert_group);
}

void check_chunk(const JobRecord& job, const JobChunkFiles& files, Findings& f) {
  const JobRecordChunk& c = *files.record;
  const std::string where = c.name();
  if (const std::optional<ParallelConfig>& at = files.manifest->parallel) {
    ParallelConfig expected = job.parallel;
    expected.stage = c.stage;
    expected.chunk = c.chunk;
    if (*at != expected) {
      f.add(where,
            fmt::format("its manifest was made for stage {} chunk {} of tp {} pp {} vpp "
                        "{} cp {} ep {} etp {}, not this job's",
                        at->stage, at->chunk, at->tp, at->pp, at->vpp, at->cp, at->ep, at->etp));
    }
  }
  const PlanOptions& o = files.layout->options;
  f.expect(where, "dense shards", job.dense_shards, o.dp);
  f.expect(where, "expert shards", job.expert_shards, o.expert_dp);
  f.expect(where, "strategy", std::string(to_string(job.strategy)),
           std::string(to_string(o.strategy)));
  if (job.strategy == Strategy::layerwise) {
    f.expect(where, "packer", std::string(to_string(job.packer)), std::string(to_string(o.packer)));
  }
  const DType grad = o.grad_reduce_in_fp32 ? DType::float32 : job.param_dtype;
  f.expect(where, "grad dtype", std::string(to_string(job.grad_dtype)),
           std::string(to_string(grad)));
  f.expect(where, "bucket size", c.bucket_size, o.bucket_size);
  f.expect(where, "param elements", c.param_elements, param_elements(*files.manifest));
  const Result<LayoutStats> stats = layout_stats(*files.layout, *files.manifest);
  if (!stats) return;  // check_layout reports what keeps the layout from being measured
  f.expect(where, "params per rank (bytes)", c.bytes_per_rank.params, stats->bytes_per_rank.params);
  f.expect(where, "grads per rank (bytes)", c.bytes_per_rank.grads, stats->bytes_per_rank.grads);
}

/// The distinct indices N of the params named `...PREFIX.N....` (`decoder.layers.`): the
/// modules of that list the manifest holds params of.
std::set<std::string> module_indices(const Manifest& manifest, std::string_view prefix) {
  std::set<std::string> found;
  for (const Param& p : manifest.params) {
    std::string_view name = p.name;
    for (std::size_t at = name.find(prefix); at != std::string_view::npos;
         at = name.find(prefix, at + 1)) {
      if (at != 0 && name[at - 1] != '.') continue;
      const std::string_view rest = name.substr(at + prefix.size());
      found.emplace(rest.substr(0, rest.find('.')));
      break;
    }
  }
  return found;
}

bool holds_word_embeddings(const Manifest& manifest) {
  return module_indices(manifest, "embedding.").count("word_embeddings") > 0;
}

/// Each local index of the `prefix` list (`decoder.layers.`) the manifest holds params of
/// must be one of the `count` the chunk records (a layer may hold none: a no-op block).
void check_local_indices(const JobChunkFiles& files, std::string_view prefix, std::string_view what,
                         std::size_t count, Findings& f) {
  for (const std::string& index : module_indices(*files.manifest, prefix)) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), n);
    if (ec != std::errc() || end != index.data() + index.size() || n >= count) {
      f.add(files.record->name(),
            fmt::format("its manifest holds params of the chunk's {} {} (from 0), job.json "
                        "records {} here",
                        what, index, count));
      return;
    }
  }
}

/// A chunk's recorded place against what its manifest holds: no more decoder or MTP layers
/// than it lists, the word embeddings where it says so.
void check_chunk_place(const JobChunkFiles& files, Findings& f) {
  const JobRecordChunk& c = *files.record;
  const std::string where = c.name();
  check_local_indices(files, "decoder.layers.", "decoder layer", c.layers.size(), f);
  check_local_indices(files, "mtp.layers.", "MTP layer", c.mtp_layers.size(), f);
  if (c.embedding != holds_word_embeddings(*files.manifest)) {
    f.add(where, c.embedding ? "job.json records the word embeddings here, its manifest holds "
                               "none"
                             : "its manifest holds the word embeddings, job.json records none "
                               "here");
  }
}

/// Over the job, as Megatron-LM places them: every decoder layer in exactly one chunk, each
/// chunk's an ascending run, and the output on the last chunk of the last stage (its
/// post_process, `is_pipeline_last_stage(ignore_virtual=False)`).
void check_placements(const JobRecord& job, Findings& f) {
  std::map<std::int64_t, std::string> owner;
  for (const JobRecordChunk& c : job.chunks) {
    for (std::size_t i = 0; i < c.layers.size(); ++i) {
      if (i > 0 && c.layers[i] != c.layers[i - 1] + 1) {
        f.add(c.name(), fmt::format("job.json records layers that are not one ascending run: "
                                    "{} after {}",
                                    c.layers[i], c.layers[i - 1]));
      }
      const auto [at, added] = owner.emplace(c.layers[i], c.name());
      if (!added) {
        f.add(c.name(),
              fmt::format("job.json records layer {} here and in {}", c.layers[i], at->second));
      }
    }
    const bool last = c.stage == job.parallel.pp - 1 && c.chunk == job.parallel.vpp - 1;
    if (c.output != last) {
      f.add(c.name(), c.output ? "job.json records the output layer here, which Megatron-LM "
                                 "builds on the last chunk of the last stage only"
                               : "job.json records no output layer on the last chunk of the "
                                 "last stage, where Megatron-LM builds it");
    }
  }
  std::int64_t expected = 0;
  for (const auto& [layer, chunk] : owner) {
    if (layer != expected) {
      f.add("job.json", fmt::format("no chunk holds layer {}", expected));
      return;
    }
    ++expected;
  }
}

/// Each stage's persistent memory terms: its chunks' recorded bytes per rank, added.
void check_persistent_memory(const JobRecord& job, const std::vector<BytesPerRank>& stages,
                             Findings& f) {
  for (const RankMemory& m : job.memory) {
    const BytesPerRank& b = stages[static_cast<std::size_t>(m.stage)];
    const std::vector<std::pair<std::string_view, std::int64_t>> expected{
        {"param_buffers", b.params}, {"grad_buffers", b.grads}, {"optimizer_state", b.optimizer}};
    for (const auto& [key, bytes] : expected) {
      std::optional<std::int64_t> recorded;
      for (const MemoryTerm& t : m.persistent) {
        if (t.key == key) recorded = t.bytes;
      }
      f.expect("job.json", fmt::format("stage {}'s {} per rank (bytes)", m.stage, key), recorded,
               std::optional<std::int64_t>(bytes));
    }
  }
}

/// The heaviest stage from the chunks' recorded figures, as plan_job picks it, and each
/// stage's persistent memory.
void check_heaviest_stage(const JobRecord& job, Findings& f) {
  std::vector<BytesPerRank> stages(static_cast<std::size_t>(job.parallel.pp));
  for (const JobRecordChunk& c : job.chunks) {
    if (c.stage >= job.parallel.pp) return;  // parse_job_json refuses such a record
    if (!stages[static_cast<std::size_t>(c.stage)].add(c.bytes_per_rank)) return;
  }
  check_persistent_memory(job, stages, f);
  const std::int64_t heaviest = heaviest_stage(stages);
  f.expect("job.json", "heaviest stage", job.heaviest_stage, heaviest);
  const BytesPerRank& b = stages[static_cast<std::size_t>(heaviest)];
  f.expect("job.json", "the heaviest stage's bytes per rank", job.heaviest_stage_bytes.total(),
           b.total());
}

}  // namespace

std::vector<Violation> check_job_record(const JobRecord& job,
                                        const std::vector<JobChunkFiles>& chunks) {
  std::vector<Violation> out;
  Findings f(out);
  check_sizes(job, f);
  for (const JobChunkFiles& files : chunks) {
    check_chunk(job, files, f);
    check_chunk_place(files, f);
  }
  check_placements(job, f);
  check_heaviest_stage(job, f);
  return out;
}

}  // namespace paramlayout
