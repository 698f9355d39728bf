// A job's figures: each chunk's layout figures with the bytes per rank job.json charges, each
// pipeline stage's chunks together, the heaviest stage (memory) and the busiest (traffic).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// "E 0-2", "33-34", "59-60 mtp 0 L": what a chunk builds (E the embedding of the first
/// chunk, L the output layer), "-" for nothing.
std::string describe_chunk(const JobRecordChunk& chunk);

/// One pipeline stage: its chunks together, as each of its ranks holds and sends them.
struct JobStageStats {
  std::int64_t stage = 0;
  std::int64_t param_elements = 0;
  std::int64_t padding = 0;  ///< elements
  BytesPerRank bytes_per_rank;
  LayoutTraffic traffic;  ///< saturated at the largest 64-bit figure

  double padding_percent() const;
};

/// The figures of a whole job.
struct JobStats {
  /// As job.json lists the chunks: each layout's figures, its bytes per rank replaced by
  /// the chunk's in job.json (the job's optimizer state, which a layout alone does not say).
  std::vector<LayoutStats> chunks;
  std::vector<JobStageStats> stages;  ///< one per pipeline stage, in order
  std::int64_t heaviest_stage = 0;    ///< as job.json names it
  std::int64_t busiest_stage = 0;     ///< the most bytes sent per rank and step; first of ties
  std::int64_t param_elements = 0;    ///< over every chunk
  std::int64_t padding = 0;           ///< over every chunk

  double padding_percent() const;
};

/// The figures of the job `record` describes, from each chunk's layout figures
/// (`chunk_stats`, as record.chunks lists them). Fails when the counts disagree, a stage's
/// bytes per rank do not fit in 64 bits, or the heaviest stage is not a stage.
Result<JobStats> job_stats(const JobRecord& record, std::vector<LayoutStats> chunk_stats);

/// The figures as one JSON object (no newline), as `stats JOB --json` prints them: the job's
/// sizes, `chunks` (each `stage`, `chunk`, `builds`, then stats_to_json's keys), `stages`,
/// `heaviest_stage`, `busiest_stage` and `totals` (formats.md).
std::string job_stats_to_json(const JobRecord& record, const JobStats& stats, double link_gbps = 0);

}  // namespace paramlayout
