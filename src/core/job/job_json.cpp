// job.json (paramlayout.job/v1) written: one line per chunk, so a diff of two jobs reads well.
#include <fmt/format.h>

#include "../analysis/figures_json.hpp"
#include "job_shape_json.hpp"
#include "memory_json.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/version.hpp"

namespace paramlayout {
namespace {

void integers(json::Writer& w, const std::vector<std::int64_t>& values) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) w.raw(", ");
    w.integer(values[i]);
  }
  w.raw("]");
}

/// One string per line at `indent`, or [] when there are none.
void strings(json::Writer& w, const std::vector<std::string>& values, std::string_view indent) {
  w.raw("[");
  for (std::size_t i = 0; i < values.size(); ++i) {
    w.raw(i > 0 ? ",\n" : "\n").raw(indent).quoted(values[i]);
  }
  if (!values.empty()) w.raw("\n").raw(indent.substr(2));
  w.raw("]");
}

void write_chunk(json::Writer& w, const JobRecordChunk& c) {
  w.raw("{\"stage\": ").integer(c.stage).raw(", \"chunk\": ").integer(c.chunk);
  w.raw(", \"layers\": ");
  integers(w, c.layers);
  w.raw(", \"mtp_layers\": ");
  integers(w, c.mtp_layers);
  w.raw(", \"embedding\": ").boolean(c.embedding);
  w.raw(", \"output\": ").boolean(c.output);
  w.raw(", \"bucket_size\": ").optional(c.bucket_size);
  w.raw(", \"manifest\": ").quoted(c.manifest);
  if (!c.manifest_sha256.empty()) w.raw(", \"manifest_sha256\": ").quoted(c.manifest_sha256);
  w.raw(", \"layout\": ").quoted(c.layout);
  if (!c.layout_sha256.empty()) w.raw(", \"layout_sha256\": ").quoted(c.layout_sha256);
  w.raw(", \"param_elements\": ").integer(c.param_elements);
  w.raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, c.bytes_per_rank);
  w.raw("}");
}

void write_launch(json::Writer& w, const LaunchRecord& launch) {
  w.raw(",\n  \"launch\": {\n    \"world_size\": ").integer(launch.world_size);
  w.raw(", \"packer\": ").quoted(launch.packer);
  w.raw(", \"model\": ").optional(launch.model);
  w.raw(", \"hf_config\": ").optional(launch.hf_config);
  w.raw(",\n    \"files\": [");
  for (std::size_t i = 0; i < launch.files.size(); ++i) {
    const LaunchFile& f = launch.files[i];
    w.raw(i > 0 ? ",\n      " : "\n      ");
    w.raw("{\"given\": ").quoted(f.given).raw(", \"path\": ").quoted(f.path);
    w.raw(", \"sha256\": ").quoted(f.sha256);
    if (!f.copy.empty()) w.raw(", \"copy\": ").quoted(f.copy);
    w.raw("}");
  }
  w.raw(launch.files.empty() ? "]" : "\n    ]");
  w.raw(",\n    \"args\": ");
  strings(w, launch.args, "      ");
  w.raw("\n  }");
}

const std::string* find_content(const std::vector<JobFile>& files, const std::string& name) {
  for (const JobFile& f : files) {
    if (f.name == name) return &f.content;
  }
  return nullptr;
}

}  // namespace

std::string JobRecordChunk::name() const { return fmt::format("stage{}.chunk{}", stage, chunk); }

JobRecord job_record(const JobSpec& job, const JobPlan& plan,
                     const std::optional<LaunchRecord>& launch, const std::vector<JobFile>& files) {
  JobRecord r;
  r.generator = std::string("paramlayout ") + std::string(kVersion);
  r.model = job.model_name;
  r.world_size = job.world_size;
  r.parallel = job.parallel;
  r.parallel.stage = 0;
  r.parallel.chunk = 0;
  r.dp = job.dp;
  r.expert_dp = job.expert_dp;
  r.strategy = job.strategy;
  r.packer = job.packer;
  r.param_dtype = job.param_dtype;
  r.grad_dtype = job.grad_reduce_in_fp32 ? DType::float32 : job.param_dtype;
  r.dense_shards = job.dense_shards();
  r.expert_shards = job.expert_shards();
  r.optimizer_state = describe_optimizer_state(job.optimizer, r.param_dtype, r.grad_dtype);
  r.ignored_arguments = job.ignored_arguments;
  r.notes = job.notes;
  for (const JobChunk& c : plan.chunks) {
    const ChunkPlacement& at = c.placement;
    JobRecordChunk& out = r.chunks.emplace_back();
    out.stage = at.stage;
    out.chunk = at.chunk;
    out.layers = at.layers;
    out.mtp_layers = at.mtp_layers;
    out.embedding = at.pre_process || !at.mtp_layers.empty();
    out.output = at.post_process;
    out.bucket_size = c.layout.options.bucket_size;
    const std::string stem = chunk_file_stem(at);
    out.manifest = stem + ".manifest.json";
    out.layout = stem + ".layout.json";
    if (const std::string* text = find_content(files, out.manifest)) {
      out.manifest_sha256 = sha256_hex(*text);
    }
    if (const std::string* text = find_content(files, out.layout)) {
      out.layout_sha256 = sha256_hex(*text);
    }
    out.param_elements = c.param_elements;
    out.bytes_per_rank = c.stats.bytes_per_rank;
  }
  r.heaviest_stage = plan.heaviest_stage;
  r.heaviest_stage_bytes = stage_memory(plan, plan.heaviest_stage).value_or(BytesPerRank{});
  // rank_memory fails only on figures past 64 bits, which the job command refuses first.
  if (Result<std::vector<RankMemory>> memory = rank_memory(job, plan)) {
    r.memory = std::move(*memory);
    r.memory_inputs = describe_activation_inputs(job);
  }
  r.launch = launch;
  return r;
}

std::vector<JobFile> job_files(const JobSpec& job, const JobPlan& plan,
                               const std::optional<LaunchRecord>& launch,
                               std::vector<JobFile> kept) {
  std::vector<JobFile> files;
  files.reserve(2 * plan.chunks.size() + kept.size() + 1);
  for (const JobChunk& c : plan.chunks) {
    const std::string stem = chunk_file_stem(c.placement);
    files.push_back({stem + ".manifest.json", write_manifest_json(c.manifest)});
    files.push_back(
        {stem + ".layout.json", write_layout_json(c.layout, stats_to_json(c.layout_stats))});
  }
  for (JobFile& f : kept) files.push_back(std::move(f));
  files.push_back({"job.json", write_job_json(job_record(job, plan, launch, files))});
  return files;
}

void write_job_shape(json::Writer& w, const JobRecord& r, std::string_view newline) {
  const ParallelConfig& p = r.parallel;
  w.raw("\"model\": ").quoted(r.model);
  w.raw(",").raw(newline).raw("\"world_size\": ").integer(r.world_size);
  w.raw(", \"tp\": ").integer(p.tp).raw(", \"pp\": ").integer(p.pp);
  w.raw(", \"vpp\": ").integer(p.vpp).raw(", \"cp\": ").integer(p.cp);
  w.raw(", \"ep\": ").integer(p.ep).raw(", \"etp\": ").integer(p.etp);
  w.raw(", \"dp\": ").integer(r.dp).raw(", \"expert_dp\": ").integer(r.expert_dp);
  w.raw(",").raw(newline).raw("\"strategy\": ").quoted(to_string(r.strategy));
  w.raw(", \"packer\": ").quoted(to_string(r.packer));
  w.raw(", \"param_dtype\": ").quoted(to_string(r.param_dtype));
  w.raw(", \"grad_dtype\": ").quoted(to_string(r.grad_dtype));
  w.raw(",").raw(newline).raw("\"dense_shards\": ").integer(r.dense_shards);
  w.raw(", \"expert_shards\": ").integer(r.expert_shards);
}

std::string write_job_json(const JobRecord& r) {
  std::string text;
  json::Writer w(text);
  w.raw("{\n  \"schema\": \"paramlayout.job/v1\",\n  \"generator\": ").quoted(r.generator);
  w.raw(",\n  ");
  write_job_shape(w, r, "\n  ");
  if (!r.optimizer_state.empty()) {
    w.raw(",\n  \"optimizer_state\": ").quoted(r.optimizer_state);
  }
  if (r.launch) write_launch(w, *r.launch);
  w.raw(",\n  \"ignored_arguments\": ");
  strings(w, r.ignored_arguments, "    ");
  w.raw(",\n  \"notes\": ");
  strings(w, r.notes, "    ");
  w.raw(",\n  \"chunks\": [");
  for (std::size_t i = 0; i < r.chunks.size(); ++i) {
    w.raw(i > 0 ? ",\n    " : "\n    ");
    write_chunk(w, r.chunks[i]);
  }
  w.raw("\n  ],\n  \"heaviest_stage\": {\"stage\": ").integer(r.heaviest_stage);
  w.raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, r.heaviest_stage_bytes);
  w.raw("}");
  if (!r.memory.empty()) {
    w.raw(",\n  \"memory\": ");
    write_memory_json(w, r.memory_inputs, r.memory);
  }
  w.raw("\n}\n");
  return text;
}

}  // namespace paramlayout
