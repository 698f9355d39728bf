// A job held against what a Megatron-LM start-up log says DDP built. Upstream references are
// Megatron-LM d98e8a64.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "paramlayout/ddp_log.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout {
namespace {

/// One buffer of one chunk of the job.
struct JobBuffer {
  std::size_t chunk = 0;
  std::size_t buffer = 0;
};

/// Where each param name of the job lies: its buffers (a name repeats across chunks, whose
/// layers Megatron-LM numbers from 0).
using NameIndex = std::unordered_map<std::string_view, std::vector<JobBuffer>>;

NameIndex index_names(const std::vector<JobChunkFiles>& chunks) {
  NameIndex index;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const std::vector<BufferLayout>& buffers = chunks[k].layout->buffers;
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      for (const ParamSlot& slot : buffers[b].params) index[slot.name].push_back({k, b});
    }
  }
  return index;
}

/// `name` as the job names it: DDP names params from the module it wraps, so a
/// Float16Module's child adds `module.` in front (training.py, get_model).
std::string_view job_name(std::string_view name, const NameIndex& index) {
  while (!index.contains(name) && name.starts_with("module.")) name.remove_prefix(7);
  return name;
}

/// The pipeline stage of global rank `rank` in the job: Megatron-LM's rank order puts the
/// stage outermost (tp-cp-ep-dp-pp); nullopt when the job's sizes do not say.
std::optional<std::int64_t> stage_of(const JobRecord& job, std::int64_t rank) {
  const std::int64_t ranks_per_stage = job.world_size / std::max<std::int64_t>(job.parallel.pp, 1);
  if (ranks_per_stage < 1) return std::nullopt;
  return rank / ranks_per_stage;
}

std::string bucket_name(std::optional<std::int64_t> bucket) {
  return bucket ? fmt::format("bucket {}", *bucket + 1) : std::string("none");
}

/// The report `logged` against buffer `b` of chunk `files`: every difference, `where` first.
std::vector<Violation> compare_buffer(const LoggedBuffer& logged, const JobChunkFiles& files,
                                      std::size_t b, const NameIndex& index) {
  const BufferLayout& buffer = files.layout->buffers[b];
  const std::string where = fmt::format("{} buffer {} ({}), {}", files.record->name(), b,
                                        describe(buffer.key), logged.place.describe());
  std::vector<Violation> out;
  const auto differ = [&](std::string what, auto log, auto job) {
    out.push_back({where, fmt::format("{}: log {}, job {}", what, log, job)});
  };
  const auto job_buckets = static_cast<std::int64_t>(buffer.buckets.size());
  const auto log_buckets = static_cast<std::int64_t>(logged.buckets.size());
  if (log_buckets != job_buckets) differ("buckets", log_buckets, job_buckets);
  std::vector<std::int64_t> elements(buffer.buckets.size(), 0);
  std::map<std::string_view, std::int64_t> job_bucket;
  for (const ParamSlot& slot : buffer.params) {
    elements[static_cast<std::size_t>(slot.bucket)] += slot.numel();
    job_bucket.emplace(slot.name, slot.bucket);
  }
  // param_and_grad_buffer.py:1433: each param's main grad is the grad buffer's dtype.
  const std::string_view main_grad = to_string(buffer.key.grad_dtype);
  std::map<std::string_view, std::int64_t> log_bucket;
  for (std::int64_t i = 0; i < std::min(log_buckets, job_buckets); ++i) {
    const LoggedBucket& l = logged.buckets[static_cast<std::size_t>(i)];
    const BucketRange& j = buffer.buckets[static_cast<std::size_t>(i)];
    const std::string bucket = fmt::format("bucket {}", i + 1);
    if (l.elements != elements[static_cast<std::size_t>(i)]) {
      differ(bucket + ": elements", group_digits(l.elements),
             group_digits(elements[static_cast<std::size_t>(i)]));
    }
    if (l.padded_size != j.size()) {
      differ(bucket + ": padded size", group_digits(l.padded_size), group_digits(j.size()));
    }
    // The job's DDP promotes no param's main grad (no
    // param_name_patterns_for_fp32_local_accumulation, param_and_grad_buffer.py:1370-1385).
    if (l.extra_main_grads != 0) {
      differ(bucket + ": params with extra main_grads", l.extra_main_grads, 0);
    }
  }
  for (std::int64_t i = 0; i < log_buckets; ++i) {
    for (const LoggedParam& p : logged.buckets[static_cast<std::size_t>(i)].params) {
      const std::string_view name = job_name(p.name, index);
      log_bucket.emplace(name, i);
      if (p.main_grad_dtype != main_grad) {
        differ(fmt::format("{}: main_grad dtype", name), p.main_grad_dtype, main_grad);
      }
    }
  }
  std::set<std::string_view> names;
  for (const auto& [name, bucket] : job_bucket) names.insert(name);
  for (const auto& [name, bucket] : log_bucket) names.insert(name);
  for (std::string_view name : names) {
    const auto in_log = log_bucket.find(name);
    const auto in_job = job_bucket.find(name);
    const std::optional<std::int64_t> l =
        in_log == log_bucket.end() ? std::nullopt : std::optional(in_log->second);
    const std::optional<std::int64_t> j =
        in_job == job_bucket.end() ? std::nullopt : std::optional(in_job->second);
    if (l != j) differ(std::string(name), bucket_name(l), bucket_name(j));
  }
  return out;
}

/// The buffer `logged` stands for, with its differences: of those holding its first param
/// (on its rank's stage when the log names the rank), one not yet taken that agrees with it,
/// else one not yet taken, else one that agrees, else the first; nullopt when the job holds
/// none of them.
std::optional<std::pair<JobBuffer, std::vector<Violation>>> buffer_for(
    const LoggedBuffer& logged, const JobRecord& job, const std::vector<JobChunkFiles>& chunks,
    const NameIndex& index, const std::set<std::pair<std::size_t, std::size_t>>& taken) {
  const std::string_view first = job_name(logged.buckets.front().params.front().name, index);
  const auto found = index.find(first);
  if (found == index.end()) return std::nullopt;
  std::vector<JobBuffer> candidates = found->second;
  if (const std::optional<std::int64_t> stage =
          logged.place.rank ? stage_of(job, *logged.place.rank) : std::nullopt) {
    std::vector<JobBuffer> on_stage;
    for (const JobBuffer& c : candidates) {
      if (chunks[c.chunk].record->stage == *stage) on_stage.push_back(c);
    }
    if (!on_stage.empty()) candidates = std::move(on_stage);
  }
  std::vector<std::vector<Violation>> differences;
  for (const JobBuffer& c : candidates) {
    differences.push_back(compare_buffer(logged, chunks[c.chunk], c.buffer, index));
  }
  const auto first_where =
      [&](bool must_be_free,
          bool must_agree) -> std::optional<std::pair<JobBuffer, std::vector<Violation>>> {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const bool free = !taken.contains({candidates[i].chunk, candidates[i].buffer});
      if ((free || !must_be_free) && (differences[i].empty() || !must_agree)) {
        return std::pair{candidates[i], differences[i]};
      }
    }
    return std::nullopt;
  };
  if (auto c = first_where(true, true)) return c;
  if (auto c = first_where(true, false)) return c;
  if (auto c = first_where(false, true)) return c;
  return std::pair{candidates.front(), differences.front()};
}

/// The first param count whose rank the job puts on another stage than the log does, as
/// a difference naming the launch; nullopt when none.
std::optional<Violation> stage_of_another_launch(const DdpLog& log, const JobRecord& job) {
  for (const LoggedParamCount& count : log.param_counts) {
    const std::optional<std::int64_t> stage =
        count.place.rank ? stage_of(job, *count.place.rank) : std::nullopt;
    if (stage && *stage != count.pp_rank) {
      return Violation{"", fmt::format("the log is of another launch: rank {} is on pipeline "
                                       "stage {} in it ({}), on stage {} in this job (world "
                                       "{}, pp {})",
                                       *count.place.rank, count.pp_rank, count.place.describe(),
                                       *stage, job.world_size, job.parallel.pp)};
    }
  }
  return std::nullopt;
}

/// Each param count against the params of its stage's chunks.
std::vector<Violation> compare_param_counts(const DdpLog& log,
                                            const std::vector<JobChunkFiles>& chunks) {
  std::vector<Violation> out;
  for (const LoggedParamCount& count : log.param_counts) {
    std::int64_t params = 0;
    bool stage_found = false;
    for (const JobChunkFiles& c : chunks) {
      if (c.record->stage != count.pp_rank) continue;
      stage_found = true;
      for (const Param& p : c.manifest->params) params += p.numel;
    }
    const std::string where = fmt::format("stage {}, {}", count.pp_rank, count.place.describe());
    if (!stage_found) {
      out.push_back({where, "the log counts params on a pipeline stage the job does not have"});
    } else if (count.params != params) {
      out.push_back(
          {where, fmt::format("params on tensor-parallel rank {}: log {}, job {}", count.tp_rank,
                              group_digits(count.params), group_digits(params))});
    }
  }
  return out;
}

/// Each memory report beside its stage's figures in job.json.
std::vector<std::string> memory_notes(const DdpLog& log, const JobRecord& job) {
  std::vector<std::string> out;
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const LoggedMemory& m : log.memory) {
    const std::int64_t stage = stage_of(job, m.rank).value_or(0);
    const double allocated = m.allocated_mib * kMiB;
    const auto figures = std::find_if(job.memory.begin(), job.memory.end(),
                                      [&](const RankMemory& r) { return r.stage == stage; });
    std::string line =
        fmt::format("rank {} (stage {}) after {} iteration{}: allocated {}", m.rank, stage,
                    m.iteration, m.iteration == 1 ? "" : "s", human_bytes(allocated));
    if (figures == job.memory.end()) {
      out.push_back(line + " (job.json records no memory for the stage)");
      continue;
    }
    const double persistent = static_cast<double>(figures->persistent_bytes);
    line += fmt::format(", {} {} than the job's persistent {} (exact)",
                        human_bytes(std::abs(allocated - persistent)),
                        allocated >= persistent ? "more" : "less", human_bytes(persistent));
    if (figures->has_activations()) {
      line += fmt::format("; max allocated {} against the job's peak {} (estimated)",
                          human_bytes(m.max_allocated_mib * kMiB),
                          human_bytes(static_cast<double>(figures->peak_bytes)));
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace

LogComparison compare_with_log(const JobRecord& job, const std::vector<JobChunkFiles>& chunks,
                               const DdpLog& log) {
  LogComparison out;
  for (const JobChunkFiles& c : chunks) out.buffers += c.layout->buffers.size();
  if (std::optional<Violation> other = stage_of_another_launch(log, job)) {
    out.differences.push_back(std::move(*other));
    return out;
  }
  const NameIndex index = index_names(chunks);
  std::set<std::pair<std::size_t, std::size_t>> taken;
  std::vector<Violation> unmatched;
  std::size_t differing = 0;
  std::vector<Violation> found;
  for (const LoggedBuffer& logged : log.buffers) {
    std::optional<std::pair<JobBuffer, std::vector<Violation>>> at =
        buffer_for(logged, job, chunks, index, taken);
    if (!at) {
      unmatched.push_back({logged.place.describe(),
                           fmt::format("a buffer of params the job does not hold (the first: {})",
                                       logged.buckets.front().params.front().name)});
      continue;
    }
    auto& [buffer, differences] = *at;
    taken.insert({buffer.chunk, buffer.buffer});
    differing += !differences.empty();
    found.insert(found.end(), differences.begin(), differences.end());
  }
  out.buffers_reported = taken.size();
  const std::size_t matched = log.buffers.size() - unmatched.size();
  if (!log.buffers.empty() && matched == 0) {
    out.differences.push_back(
        {"", fmt::format("the log is of another model: none of its {} bucket report{} names a "
                         "param of this job (the first names {}, {})",
                         log.buffers.size(), log.buffers.size() == 1 ? "" : "s",
                         log.buffers.front().buckets.front().params.front().name,
                         log.buffers.front().place.describe())});
    return out;
  }
  if (matched >= 3 && differing == matched) {
    out.differences.push_back(
        {"", fmt::format("the log is of another launch: each of its {} reported buffers "
                         "differs from this job's (the first: {})",
                         matched, found.front().message())});
    return out;
  }
  out.memory_notes = memory_notes(log, job);
  out.differences = std::move(unmatched);
  out.differences.insert(out.differences.end(), found.begin(), found.end());
  std::vector<Violation> counts = compare_param_counts(log, chunks);
  out.param_counts = log.param_counts.size();
  out.differences.insert(out.differences.end(), counts.begin(), counts.end());
  return out;
}

}  // namespace paramlayout
