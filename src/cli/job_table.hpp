// A job for people: what it is (its sizes, how its buffers are sharded) and its table of
// stages and chunks, as `job` prints it after planning and `stats JOB` prints it again.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "job_input.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/job_stats.hpp"

namespace paramlayout::cli {

/// What the header says beyond job.json.
struct JobHeaderFacts {
  bool experts = false;         ///< the model has routed experts
  bool expert_buffers = false;  ///< a chunk has a buffer of expert-parallel params
  std::string optimizer_state;  ///< a line on the optimizer's state; "" for none
};

/// The job's sizes, strategy and dtypes, how its buffers are sharded and reduced, the
/// optimizer state, the notes and the arguments ignored.
void print_job_header(std::FILE* out, const JobRecord& record, const JobHeaderFacts& facts);

/// Per stage and chunk: what it builds, its param elements, padding and bytes per rank
/// (params, grads, optimizer state, total); each stage's chunks together when there are
/// virtual chunks; then the heaviest stage and the stage that sends the most per step.
void print_job_table(std::FILE* out, const JobRecord& record, const JobStats& stats);

/// Per stage and chunk, what each rank moves per training step: its buckets, the bytes it
/// sends under ring algorithms and the padding's share of them, the bytes reduce-scattered,
/// all-gathered and all-reduced; each stage's chunks together when there are virtual chunks;
/// with `link_gbps` > 0, the ring model's time of the collectives.
void print_job_traffic_table(std::FILE* out, const JobRecord& record, const JobStats& stats,
                             double link_gbps);

/// A job read back with its figures: every chunk's layout figures recomputed from its files,
/// the bytes per rank from job.json (`check JOB` holds them to the files).
struct JobWithStats {
  LoadedJob job;
  JobStats stats;
};

/// Reads the job at `path` (refusing one whose files are not the ones job.json names) and
/// computes its figures; errors name the chunk.
Result<JobWithStats> load_job_with_stats(const std::string& path, std::uint64_t max_bytes);

/// Whether any chunk of `job` has a buffer of expert-parallel params.
bool has_expert_buffers(const LoadedJob& job);

}  // namespace paramlayout::cli
