// What a Megatron-LM start-up log says DDP built: each buffer's bucket report
// (param_and_grad_buffer.py:1414-1435) and each rank's param count (training.py:2441-2455),
// read from plain logs or lines prefixed by torchrun, srun or mpirun; and a job held against
// them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/check.hpp"
#include "paramlayout/check_job.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/job_record.hpp"

namespace paramlayout {

/// One param line of a bucket report: `\tNAME (param.main_grad.dtype=torch.float32)`.
struct LoggedParam {
  std::string name;
  std::string main_grad_dtype;  ///< "float32", "bfloat16", ...
};

/// `Params for bucket K (E elements, P padded size, X param(s) with extra main_grads):`.
struct LoggedBucket {
  std::int64_t elements = 0;
  std::int64_t padded_size = 0;
  std::int64_t extra_main_grads = 0;
  std::vector<LoggedParam> params;
};

/// Where a report came from: the log and the line its first line is on, and the rank the
/// launcher's prefix names (nullopt without one).
struct LogPlace {
  std::string source;
  std::int64_t line = 0;
  std::optional<std::int64_t> rank;

  /// "train.log:120 rank 8".
  std::string describe() const;
};

/// One buffer's report: `Number of buckets for gradient all-reduce / reduce-scatter: N` and
/// its N buckets.
struct LoggedBuffer {
  LogPlace place;
  std::vector<LoggedBucket> buckets;
};

/// ` > number of parameters on (tensor, gtp_weight_remat, pipeline) model parallel rank
/// (T, G, P): N` (older Megatron-LM: `(tensor, pipeline) ... (T, P): N`).
struct LoggedParamCount {
  LogPlace place;
  std::int64_t tp_rank = 0;
  std::int64_t pp_rank = 0;
  std::int64_t params = 0;
};

/// `[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: M | ...`
/// (report_memory, training/utils/common_utils.py:313-334).
struct LoggedMemory {
  LogPlace place;
  std::int64_t rank = 0;
  std::int64_t iteration = 0;
  double allocated_mib = 0;
  double max_allocated_mib = 0;
};

/// Every report found in one or more logs.
struct DdpLog {
  std::vector<LoggedBuffer> buffers;
  std::vector<LoggedParamCount> param_counts;
  std::vector<LoggedMemory> memory;
};

/// Adds the reports in `text` (one log, named `source` in messages) to `log`. Lines of
/// several ranks may interleave when a launcher prefixes them (`[rank3]:`, `[default3]:`,
/// `3: `, `[1,3]<stdout>:`). A report cut short (fewer buckets or params than it announces,
/// a count that is not a number) is an error naming its line.
Result<void> read_ddp_log(std::string_view text, const std::string& source, DdpLog& log);

/// The job held against a log.
struct LogComparison {
  std::vector<Violation> differences;  ///< none: every report agrees with the job
  std::size_t buffers_reported = 0;    ///< the job's buffers some report stands for
  std::size_t buffers = 0;             ///< the job's buffers
  std::size_t param_counts = 0;        ///< param counts compared
  /// Each memory report beside the job's figures for its stage: the persistent bytes (exact)
  /// and the peak (estimated), and what the rank holds beyond them. Figures, not differences:
  /// allocated memory holds more than the job counts (docs/memory.md).
  std::vector<std::string> memory_notes;
};

/// What the log says against the job: for each reported buffer, the chunk and buffer of the
/// job that holds its params (on the reporting rank's stage when its prefix names a global
/// rank: Megatron-LM's rank order puts the stage outermost), then its bucket count, each
/// bucket's elements, padded size and params, each param's main-grad dtype and the params
/// with extra main grads; each param count against its stage's params. A log whose reports
/// name no param of the job, or of whose several reports none agrees, is one difference
/// saying so.
LogComparison compare_with_log(const JobRecord& job, const std::vector<JobChunkFiles>& chunks,
                               const DdpLog& log);

}  // namespace paramlayout
