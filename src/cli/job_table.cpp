#include "job_table.hpp"

#include <fmt/format.h>

#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

/// Bytes for people: "14.96 GiB".
std::string bytes_text(std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

void print_busiest_stage(std::FILE* out, const JobStats& stats) {
  const LayoutTraffic& t = stats.stages[static_cast<std::size_t>(stats.busiest_stage)].traffic;
  if (t.sent_bytes == 0) {
    fmt::print(out, "  no data-parallel traffic: each buffer's collectives span a single rank\n");
    return;
  }
  fmt::print(out, "  most traffic: stage {}, each rank sends {} per step ({:.2f}% padding)",
             stats.busiest_stage, bytes_text(t.sent_bytes), t.padding_percent());
  if (t.all_reduce_bytes > 0) {
    fmt::print(out, "; all-reduces {}\n", bytes_text(t.all_reduce_bytes));
  } else {
    fmt::print(out, "; reduce-scatters {}, all-gathers {}\n", bytes_text(t.reduce_scatter_bytes),
               bytes_text(t.all_gather_bytes));
  }
}

}  // namespace

void print_job_header(std::FILE* out, const JobRecord& r, const JobHeaderFacts& facts) {
  const ParallelConfig& p = r.parallel;
  fmt::print(out, "{}: {} GPUs = tp {} x pp {} x cp {} x dp {}", r.model,
             group_digits(r.world_size), p.tp, p.pp, p.cp, r.dp);
  if (facts.experts) {
    fmt::print(out, "; experts: ep {} x etp {} x expert dp {}", p.ep, p.etp, r.expert_dp);
  }
  if (p.vpp > 1) fmt::print(out, "; {} virtual chunks per stage", p.vpp);
  fmt::print(out, "\n  {}, {} params, {} grads; ", to_string(r.strategy), to_string(r.param_dtype),
             to_string(r.grad_dtype));
  if (r.strategy == Strategy::unpadded) {
    // Without the distributed optimizer every rank keeps whole buffers and all-reduces them.
    fmt::print(out,
               "buffers not sharded (no distributed optimizer), grads all-reduced over "
               "{} ranks",
               r.dp * p.cp);
    if (facts.expert_buffers) fmt::print(out, " (expert grads over {})", r.expert_dp);
  } else {
    fmt::print(out, "buffers sharded over {} ranks", r.dense_shards);
    if (facts.expert_buffers) fmt::print(out, " (expert buffers over {})", r.expert_shards);
  }
  fmt::print(out, "\n");
  if (!facts.optimizer_state.empty()) {
    fmt::print(out, "  optimizer state: {}\n", facts.optimizer_state);
  }
  for (const std::string& note : r.notes) fmt::print(out, "  note: {}\n", note);
  if (!r.ignored_arguments.empty()) {
    constexpr std::size_t kShown = 6;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < r.ignored_arguments.size() && i < kShown; ++i) {
      const std::string& a = r.ignored_arguments[i];
      names.push_back(a.substr(0, a.find(' ')));
    }
    const std::size_t more = r.ignored_arguments.size() - names.size();
    const bool one = r.ignored_arguments.size() == 1;
    fmt::print(out, "  ignored {} argument{} that {} not change the layout: {}{}\n",
               r.ignored_arguments.size(), one ? "" : "s", one ? "does" : "do",
               fmt::join(names, ", "),
               more > 0 ? fmt::format(" and {} more (job.json lists them)", more) : "");
  }
}

void print_job_table(std::FILE* out, const JobRecord& record, const JobStats& stats) {
  constexpr const char* kRow = "  {:>5} {:>5}  {:<16} {:>17} {:>8} {:>11} {:>11} {:>11} {:>11}\n";
  fmt::print(out, "\n");
  fmt::print(out, kRow, "stage", "chunk", "builds", "param elements", "padding", "params/rank",
             "grads/rank", "optim/rank", "total/rank");
  for (const JobStageStats& stage : stats.stages) {
    for (std::size_t i = 0; i < record.chunks.size(); ++i) {
      const JobRecordChunk& c = record.chunks[i];
      if (c.stage != stage.stage) continue;
      const BytesPerRank& b = c.bytes_per_rank;
      fmt::print(out, kRow, c.stage, c.chunk, describe_chunk(c), group_digits(c.param_elements),
                 fmt::format("{:.2f}%", stats.chunks[i].padding_percent()), bytes_text(b.params),
                 bytes_text(b.grads), bytes_text(b.optimizer), bytes_text(b.total()));
    }
    if (record.parallel.vpp > 1) {
      const BytesPerRank& m = stage.bytes_per_rank;
      fmt::print(out, kRow, stage.stage, "all", "", "", "", bytes_text(m.params),
                 bytes_text(m.grads), bytes_text(m.optimizer), bytes_text(m.total()));
    }
  }
  const BytesPerRank& heaviest =
      stats.stages[static_cast<std::size_t>(stats.heaviest_stage)].bytes_per_rank;
  fmt::print(out, "  heaviest stage: {}, {} per rank (params {}, grads {}, optimizer state {})\n",
             stats.heaviest_stage, bytes_text(heaviest.total()), bytes_text(heaviest.params),
             bytes_text(heaviest.grads), bytes_text(heaviest.optimizer));
  print_busiest_stage(out, stats);
}

void print_job_traffic_table(std::FILE* out, const JobRecord& record, const JobStats& stats,
                             double link_gbps) {
  constexpr const char* kRow = "  {:>5} {:>5}  {:>7} {:>11} {:>8} {:>14} {:>11} {:>11}{}\n";
  const std::string time =
      link_gbps > 0 ? fmt::format("  {:>12}", fmt::format("at {:g} Gb/s", link_gbps)) : "";
  fmt::print(out, "\n  per step, each rank of a stage:\n");
  fmt::print(out, kRow, "stage", "chunk", "buckets", "sends", "padding", "reduce-scatter",
             "all-gather", "all-reduce", time);
  const auto row = [&](std::int64_t stage, const std::string& chunk, const std::string& buckets,
                       const LayoutTraffic& t) {
    fmt::print(out, kRow, stage, chunk, buckets, bytes_text(t.sent_bytes),
               fmt::format("{:.2f}%", t.padding_percent()), bytes_text(t.reduce_scatter_bytes),
               bytes_text(t.all_gather_bytes), bytes_text(t.all_reduce_bytes),
               link_gbps > 0 ? fmt::format("  {:>10.3g} s", t.estimated_seconds(link_gbps)) : "");
  };
  for (const JobStageStats& stage : stats.stages) {
    for (std::size_t i = 0; i < record.chunks.size(); ++i) {
      if (record.chunks[i].stage != stage.stage) continue;
      std::int64_t buckets = 0;
      for (const BufferStats& b : stats.chunks[i].buffers) buckets += b.traffic.buckets;
      row(stage.stage, fmt::format("{}", record.chunks[i].chunk), group_digits(buckets),
          stats.chunks[i].traffic);
    }
    if (record.parallel.vpp > 1) row(stage.stage, "all", "", stage.traffic);
  }
}

Result<JobWithStats> load_job_with_stats(const std::string& path, std::uint64_t max_bytes) {
  Result<LoadedJob> job = load_job(path, max_bytes);
  if (!job) return job.error();
  if (Result<void> recorded = require_as_recorded(*job); !recorded) return recorded.error();
  std::vector<LayoutStats> chunk_stats;
  chunk_stats.reserve(job->chunks.size());
  for (const JobChunkInput& c : job->chunks) {
    Result<LayoutStats> stats = layout_stats(c.layout, c.manifest);
    if (!stats) return Error{c.record->name() + ": " + stats.error().message};
    chunk_stats.push_back(std::move(*stats));
  }
  Result<JobStats> stats = job_stats(job->job.record, std::move(chunk_stats));
  if (!stats) return Error{job->job.json_path + ": " + stats.error().message};
  return JobWithStats{std::move(*job), std::move(*stats)};
}

bool has_expert_buffers(const LoadedJob& job) {
  for (const JobChunkInput& c : job.chunks) {
    for (const BufferLayout& b : c.layout.buffers) {
      if (b.key.expert_parallel) return true;
    }
  }
  return false;
}

}  // namespace paramlayout::cli
