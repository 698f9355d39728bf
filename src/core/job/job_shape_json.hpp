// The job's shape as job.json and `stats JOB --json` both write it.
#pragma once

#include <string_view>

#include "../format/json_writer.hpp"
#include "paramlayout/job_record.hpp"

namespace paramlayout {

/// "model", "world_size", the parallel sizes, dp and expert dp, strategy, packer, dtypes and
/// shards: the members, without braces. `newline` ("\n  " or " ") goes before "world_size",
/// "strategy" and "dense_shards", so that job.json reads a group per line.
void write_job_shape(json::Writer& w, const JobRecord& r, std::string_view newline);

}  // namespace paramlayout
