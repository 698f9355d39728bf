// A job read back, checked whole: each chunk's layout keeps its promises (check.hpp), and
// job.json agrees with the chunk files it names.
#pragma once

#include <vector>

#include "paramlayout/check.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// One chunk of a job as read back from its files.
struct JobChunkFiles {
  const JobRecordChunk* record = nullptr;
  const Manifest* manifest = nullptr;
  const Layout* layout = nullptr;
};

/// Where job.json disagrees with itself or with its chunks: dp and expert dp from the sizes;
/// per chunk, the placement and sizes its manifest records, the options its layout was
/// planned with (shards, strategy, packer, grad dtype, bucket size), its param elements and
/// its params and grads per rank, the layers and embeddings its manifest holds; the job's
/// layers each in one chunk and its output on the last; and the heaviest stage from the
/// chunks' figures. `where`
/// names the chunk (`stage1.chunk0`) or job.json.
std::vector<Violation> check_job_record(const JobRecord& job,
                                        const std::vector<JobChunkFiles>& chunks);

}  // namespace paramlayout
