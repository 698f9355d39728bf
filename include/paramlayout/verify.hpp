// verify: the static pass of check, then a data pass that fills real gradient and parameter
// buffers, runs the reduce-scatter and all-gather DDP would run, and checks every element.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/check.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

namespace verify {
class Backend;
class Peers;
}  // namespace verify

/// The processes one verify run spans: this one alone, or one per GPU when an MPI launcher
/// (mpirun, srun) started several, which then bootstrap NCCL together. Join first, before
/// reading inputs, and keep it until verify is done; only rank 0 should print.
class ProcessGroup {
 public:
  /// Fails when several processes were launched but this build has no MPI.
  static Result<ProcessGroup> join();
  ProcessGroup(ProcessGroup&&) noexcept;
  ProcessGroup& operator=(ProcessGroup&&) noexcept;
  ~ProcessGroup();

  int rank() const;
  int size() const;
  bool reports() const { return rank() == 0; }
  /// The lowest failing rank's message, on every process; nothing when none failed.
  std::optional<std::string> first_failure(const std::optional<std::string>& mine);
  /// True on every process when every process passed the same `mine`.
  bool all_agree(const std::string& mine);
  verify::Peers& peers() { return *peers_; }

 private:
  explicit ProcessGroup(std::unique_ptr<verify::Peers> peers);
  std::unique_ptr<verify::Peers> peers_;
};

/// Which machine runs the data pass.
enum class BackendChoice : std::uint8_t {
  automatic,  ///< nccl when a GPU is visible, else cpu
  cpu,        ///< host memory, every rank in this process
  nccl,       ///< CUDA buffers and NCCL collectives
};

/// How far the data pass is.
struct VerifyProgress {
  std::size_t buckets_done = 0;
  std::size_t buckets = 0;
  std::int64_t elements_done = 0;
  std::int64_t elements = 0;  ///< every bucket's size added up
};

struct VerifyOptions {
  BackendChoice backend = BackendChoice::automatic;
  int gpus = 0;                  ///< GPUs (nccl) or simulated devices (cpu) to use; 0: default
  double timeout_seconds = 300;  ///< a collective that takes longer is aborted
  /// Largest number of elements each device block moves per collective; 0: the backend's
  /// memory budget decides. A bucket larger than that is verified in chunks.
  std::int64_t max_block_elements = 0;
  /// The most elements the data pass may move (the buffers' numel added up); a larger
  /// layout is refused before the data pass. 0: no limit.
  std::int64_t max_elements = 0;
  /// Called once before the data pass and after each chunk of a bucket.
  std::function<void(const VerifyProgress&)> progress;
  /// The processes the data pass spans; null: this process alone. Several need nccl.
  ProcessGroup* processes = nullptr;
};

/// One bucket's data pass.
struct BucketReport {
  std::size_t buffer = 0;
  std::int64_t bucket = 0;
  std::int64_t ranks = 0;
  std::int64_t devices = 0;  ///< devices the ranks were spread over (the collectives' size)
  std::int64_t elements = 0;
  std::int64_t chunks = 0;
  std::int64_t grad_mismatches = 0;
  std::int64_t param_mismatches = 0;
  double reduce_scatter_seconds = 0;
  double all_gather_seconds = 0;
  double reduce_scatter_bytes = 0;  ///< nccl-tests' "size": the whole bucket, per collective
  double all_gather_bytes = 0;
  /// The fill and check work around the collectives: bytes written (values and poison) and
  /// bytes compared, on every device together, and the seconds of the slowest device.
  double fill_seconds = 0;
  double check_seconds = 0;
  double filled_bytes = 0;
  double checked_bytes = 0;

  double seconds() const { return reduce_scatter_seconds + all_gather_seconds; }
  /// nccl-tests' algorithm bandwidth, bytes per second, over both collectives.
  double algbw() const;
  /// nccl-tests' bus bandwidth for reduce-scatter and all-gather: algbw * (n - 1) / n.
  double busbw() const;
  /// Layerwise buckets: params that did not arrive whole at the rank owning them.
  std::vector<std::string> incomplete_params;
};

/// A wrong element, as the user needs to find it.
struct ElementMismatch {
  std::size_t buffer = 0;
  std::int64_t bucket = 0;
  std::string round;  ///< "grads (reduce-scatter)" or "params (all-gather)"
  std::int64_t rank = 0;
  std::string param;         ///< empty for padding
  std::int64_t element = 0;  ///< within the param
  std::int64_t offset = 0;   ///< within the buffer
  std::string expected;
  std::string received;
};

struct VerifyReport {
  std::string backend;  ///< what ran the data pass
  std::vector<std::string> notes;
  std::int64_t devices = 0;
  std::vector<Violation> violations;  ///< the static pass; the data pass runs only without
  std::vector<BucketReport> buckets;
  std::int64_t mismatches = 0;
  std::vector<ElementMismatch> first_mismatches;  ///< the first 10
  double seconds = 0;

  bool ok() const { return violations.empty() && mismatches == 0; }
};

/// Runs the static pass, then (when it holds) the data pass. Errors are for bad options, no
/// usable device, CUDA or NCCL failures and timeouts, not for a wrong layout.
Result<VerifyReport> verify_layout(const Layout& layout, const Manifest& manifest,
                                   const VerifyOptions& options);

/// Verifies layout after layout (a job's chunks) on one backend, started at the first data
/// pass and kept: the devices, buffers and communicators are set up once. Each layout is
/// verified as verify_layout verifies it; under several processes, every process must
/// verify the same layouts in the same order.
class VerifySession {
 public:
  explicit VerifySession(VerifyOptions options);
  VerifySession(VerifySession&&) noexcept;
  VerifySession& operator=(VerifySession&&) noexcept;
  ~VerifySession();

  /// The next layout; the report of the one that started the backend carries its notes.
  Result<VerifyReport> verify(const Layout& layout, const Manifest& manifest);

 private:
  Result<std::unique_ptr<verify::Backend>> start_backend(std::vector<std::string>& notes);

  VerifyOptions options_;
  std::unique_ptr<verify::Peers> solo_;       ///< this process alone, when options_ name none
  std::unique_ptr<verify::Backend> backend_;  ///< holds on to the peers
};

/// The report as one JSON object (`--report FILE`).
std::string verify_report_json(const VerifyReport& report, const Layout& layout);

/// One chunk of a job, verified.
struct ChunkVerifyReport {
  std::string name;  ///< `stageS.chunkC`
  std::int64_t stage = 0;
  std::int64_t chunk = 0;
  const Layout* layout = nullptr;  ///< the chunk's layout (its dp, its buffers' keys)
  VerifyReport report;
};

/// A job's report as one JSON object (`verify JOB --report FILE`): the totals, then per
/// chunk its stage, chunk, dp and expert dp and the members of verify_report_json.
std::string verify_job_report_json(std::string_view job,
                                   const std::vector<ChunkVerifyReport>& chunks);

}  // namespace paramlayout
