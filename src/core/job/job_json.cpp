// job.json (paramlayout.job/v1): one line per chunk, so a diff of two jobs reads well.
#include <fmt/format.h>

#include "../format/json_writer.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/version.hpp"

namespace paramlayout {
namespace {

void bytes(json::Writer& w, const BytesPerRank& b) {
  w.raw("{\"params\": ").integer(b.params).raw(", \"grads\": ").integer(b.grads);
  w.raw(", \"optimizer\": ").integer(b.optimizer).raw("}");
}

void integers(json::Writer& w, const std::vector<std::int64_t>& values) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) w.raw(", ");
    w.integer(values[i]);
  }
  w.raw("]");
}

void strings(json::Writer& w, const std::vector<std::string>& values) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) {
    w.raw(i > 0 ? ",\n    " : "\n    ").quoted(values[i]);
  }
  w.raw(values.empty() ? "]" : "\n  ]");
}

}  // namespace

std::string write_job_json(const JobSpec& job, const JobPlan& plan) {
  std::string text;
  json::Writer w(text);
  const ParallelConfig& p = job.parallel;
  w.raw("{\n  \"schema\": \"paramlayout.job/v1\",\n  \"generator\": ")
      .quoted(std::string("paramlayout ") + std::string(kVersion));
  w.raw(",\n  \"model\": ").quoted(job.model_name);
  w.raw(",\n  \"world_size\": ").integer(job.world_size);
  w.raw(", \"tp\": ").integer(p.tp).raw(", \"pp\": ").integer(p.pp);
  w.raw(", \"vpp\": ").integer(p.vpp).raw(", \"cp\": ").integer(p.cp);
  w.raw(", \"ep\": ").integer(p.ep).raw(", \"etp\": ").integer(p.etp);
  w.raw(", \"dp\": ").integer(job.dp).raw(", \"expert_dp\": ").integer(job.expert_dp);
  w.raw(",\n  \"strategy\": ").quoted(to_string(job.strategy));
  w.raw(", \"packer\": ").quoted(to_string(job.packer));
  w.raw(", \"param_dtype\": ").quoted(to_string(job.param_dtype));
  w.raw(", \"grad_dtype\": ")
      .quoted(to_string(job.grad_reduce_in_fp32 ? DType::float32 : job.param_dtype));
  w.raw(",\n  \"dense_shards\": ").integer(job.dense_shards());
  w.raw(", \"expert_shards\": ").integer(job.expert_shards());
  w.raw(",\n  \"ignored_arguments\": ");
  strings(w, job.ignored_arguments);
  w.raw(",\n  \"notes\": ");
  strings(w, job.notes);
  w.raw(",\n  \"chunks\": [");
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const JobChunk& c = plan.chunks[i];
    const ChunkPlacement& at = c.placement;
    w.raw(i > 0 ? ",\n    " : "\n    ");
    w.raw("{\"stage\": ").integer(at.stage).raw(", \"chunk\": ").integer(at.chunk);
    w.raw(", \"layers\": ");
    integers(w, at.layers);
    w.raw(", \"mtp_layers\": ");
    integers(w, at.mtp_layers);
    w.raw(", \"embedding\": ").boolean(at.pre_process || !at.mtp_layers.empty());
    w.raw(", \"output\": ").boolean(at.post_process);
    w.raw(", \"bucket_size\": ").optional(c.layout.options.bucket_size);
    const std::string stem = chunk_file_stem(at);
    w.raw(", \"manifest\": ").quoted(stem + ".manifest.json");
    w.raw(", \"layout\": ").quoted(stem + ".layout.json");
    w.raw(", \"param_elements\": ").integer(c.param_elements);
    w.raw(", \"bytes_per_rank\": ");
    bytes(w, c.stats.bytes_per_rank);
    w.raw("}");
  }
  const BytesPerRank heaviest = stage_memory(plan, plan.heaviest_stage).value_or(BytesPerRank{});
  w.raw("\n  ],\n  \"heaviest_stage\": {\"stage\": ").integer(plan.heaviest_stage);
  w.raw(", \"bytes_per_rank\": ");
  bytes(w, heaviest);
  w.raw("}\n}\n");
  return text;
}

}  // namespace paramlayout
