#include "paramlayout/job_stats.hpp"
#include "memory_json.hpp"

#include <fmt/format.h>

#include <limits>

#include "../analysis/figures_json.hpp"
#include "job_shape_json.hpp"

namespace paramlayout {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

std::int64_t saturated_add(std::int64_t a, std::int64_t b) {
  return checked_add(a, b).value_or(kMax);
}

void add_traffic(LayoutTraffic& to, const LayoutTraffic& t) {
  for (auto field : {&LayoutTraffic::reduce_scatter_bytes, &LayoutTraffic::all_gather_bytes,
                     &LayoutTraffic::all_reduce_bytes, &LayoutTraffic::sent_bytes,
                     &LayoutTraffic::padding_sent_bytes}) {
    to.*field = saturated_add(to.*field, t.*field);
  }
}

void write_traffic(json::Writer& w, const LayoutTraffic& t) {
  w.raw("{");
  write_traffic_members(w, t);
  w.raw("}");
}

std::string percent_text(double value) { return fmt::format("{:.4f}", value); }

}  // namespace

std::string describe_chunk(const JobRecordChunk& c) {
  std::vector<std::string> parts;
  // The embedding of the first chunk (a chunk with multi-token prediction layers holds
  // the word embeddings too, but builds no embedding layer of the decoder).
  if (c.embedding && c.stage == 0 && c.chunk == 0) parts.emplace_back("E");
  if (c.layers.size() == 1) parts.push_back(fmt::format("{}", c.layers.front()));
  if (c.layers.size() > 1) parts.push_back(fmt::format("{}-{}", c.layers.front(), c.layers.back()));
  if (!c.mtp_layers.empty()) {
    parts.push_back(c.mtp_layers.size() == 1
                        ? fmt::format("mtp {}", c.mtp_layers.front())
                        : fmt::format("mtp {}-{}", c.mtp_layers.front(), c.mtp_layers.back()));
  }
  if (c.output) parts.emplace_back("L");
  return parts.empty() ? std::string("-") : fmt::format("{}", fmt::join(parts, " "));
}

double JobStageStats::padding_percent() const {
  return padding_share_percent(padding, param_elements);
}

double JobStats::padding_percent() const { return padding_share_percent(padding, param_elements); }

Result<JobStats> job_stats(const JobRecord& record, std::vector<LayoutStats> chunk_stats) {
  if (chunk_stats.size() != record.chunks.size()) {
    return Error{fmt::format("{} chunks' figures for the {} chunks of the job", chunk_stats.size(),
                             record.chunks.size())};
  }
  const std::int64_t pp = record.parallel.pp;
  if (record.heaviest_stage < 0 || record.heaviest_stage >= pp) {
    return Error{fmt::format("the heaviest stage, {}, is not one of the {} stages",
                             record.heaviest_stage, pp)};
  }
  JobStats out;
  out.heaviest_stage = record.heaviest_stage;
  out.stages.resize(static_cast<std::size_t>(pp));
  for (std::int64_t s = 0; s < pp; ++s) out.stages[static_cast<std::size_t>(s)].stage = s;
  for (std::size_t i = 0; i < chunk_stats.size(); ++i) {
    const JobRecordChunk& c = record.chunks[i];
    LayoutStats& stats = chunk_stats[i];
    stats.bytes_per_rank = c.bytes_per_rank;
    if (c.stage < 0 || c.stage >= pp) {
      return Error{fmt::format("{}: stage {} is not one of the {} stages", c.name(), c.stage, pp)};
    }
    JobStageStats& stage = out.stages[static_cast<std::size_t>(c.stage)];
    if (!stage.bytes_per_rank.add(c.bytes_per_rank)) {
      return Error{fmt::format("stage {}: its bytes per rank do not fit in 64 bits", c.stage)};
    }
    stage.param_elements = saturated_add(stage.param_elements, stats.param_elements);
    stage.padding = saturated_add(stage.padding, stats.padding);
    add_traffic(stage.traffic, stats.traffic);
    out.param_elements = saturated_add(out.param_elements, stats.param_elements);
    out.padding = saturated_add(out.padding, stats.padding);
  }
  for (const JobStageStats& s : out.stages) {
    if (s.traffic.sent_bytes >
        out.stages[static_cast<std::size_t>(out.busiest_stage)].traffic.sent_bytes) {
      out.busiest_stage = s.stage;
    }
  }
  out.chunks = std::move(chunk_stats);
  return out;
}

std::string job_stats_to_json(const JobRecord& r, const JobStats& s, double link_gbps) {
  std::string text;
  json::Writer w(text);
  w.raw("{");
  write_job_shape(w, r, " ");
  w.raw(", \"chunks\": [");
  for (std::size_t i = 0; i < s.chunks.size(); ++i) {
    const JobRecordChunk& c = r.chunks[i];
    // stats_to_json's object, with the chunk's place before its keys.
    const std::string figures = stats_to_json(s.chunks[i], link_gbps);
    w.raw(i > 0 ? ", " : "").raw("{\"stage\": ").integer(c.stage);
    w.raw(", \"chunk\": ").integer(c.chunk).raw(", \"builds\": ").quoted(describe_chunk(c));
    w.raw(", ").raw(std::string_view(figures).substr(1));
  }
  w.raw("], \"stages\": [");
  for (const JobStageStats& stage : s.stages) {
    w.raw(stage.stage > 0 ? ", " : "").raw("{\"stage\": ").integer(stage.stage);
    w.raw(", \"param_elements\": ").integer(stage.param_elements);
    w.raw(", \"padding\": ").integer(stage.padding);
    w.raw(", \"padding_percent\": ").raw(percent_text(stage.padding_percent()));
    w.raw(", \"bytes_per_rank\": ");
    write_bytes_per_rank(w, stage.bytes_per_rank);
    w.raw(", \"traffic_per_step\": ");
    write_traffic(w, stage.traffic);
    w.raw("}");
  }
  const JobStageStats& heaviest = s.stages[static_cast<std::size_t>(s.heaviest_stage)];
  w.raw("], \"heaviest_stage\": {\"stage\": ").integer(heaviest.stage);
  w.raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, heaviest.bytes_per_rank);
  const JobStageStats& busiest = s.stages[static_cast<std::size_t>(s.busiest_stage)];
  w.raw("}, \"busiest_stage\": {\"stage\": ").integer(busiest.stage);
  w.raw(", \"sent_bytes\": ").integer(busiest.traffic.sent_bytes);
  w.raw(", \"padding_sent_bytes\": ").integer(busiest.traffic.padding_sent_bytes);
  w.raw("}, \"totals\": {\"chunks\": ").integer(static_cast<std::int64_t>(s.chunks.size()));
  w.raw(", \"param_elements\": ").integer(s.param_elements);
  w.raw(", \"padding\": ").integer(s.padding);
  w.raw(", \"padding_percent\": ").raw(percent_text(s.padding_percent()));
  w.raw("}");
  if (!r.memory.empty()) {
    w.raw(", \"memory\": ");
    write_memory_detail_json(w, r.memory_inputs, r.memory);
  }
  w.raw("}");
  return text;
}

}  // namespace paramlayout
