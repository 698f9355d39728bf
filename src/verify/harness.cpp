// The verify harness: owns the loops over buffers, buckets and chunks, the timing and the
// report; backends only fill, move and compare buffers.
#include "harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "paramlayout/text.hpp"

namespace paramlayout::verify {
namespace {

Encoding encoding_of(DType d) {
  switch (d) {
    case DType::float32:
      return Encoding::float32;
    case DType::bfloat16:
      return Encoding::bfloat16;
    case DType::float16:
      return Encoding::float16;
    case DType::uint8:
      return Encoding::uint8;
  }
  return Encoding::uint8;
}

/// The value behind some bits, as people read it.
std::string bits_text(std::uint32_t bits, Encoding e) {
  if (bits == poison_bits(e)) return "never written (poison)";
  switch (e) {
    case Encoding::uint8:
      return fmt::format("{}", bits);
    case Encoding::float32: {
      float f = 0;
      std::memcpy(&f, &bits, sizeof f);
      return fmt::format("{:g} (0x{:08x})", f, bits);
    }
    case Encoding::bfloat16: {
      const std::uint32_t wide = bits << 16;
      float f = 0;
      std::memcpy(&f, &wide, sizeof f);
      return fmt::format("{:g} (0x{:04x})", f, bits);
    }
    case Encoding::float16: {
      const int exponent = static_cast<int>((bits >> 10) & 0x1F);
      const double mantissa = bits & 0x3FF;
      const double value = exponent == 0 ? mantissa / 1024 * std::ldexp(1.0, -14)
                                         : (1 + mantissa / 1024) * std::ldexp(1.0, exponent - 15);
      return fmt::format("{:g} (0x{:04x})", (bits & 0x8000) ? -value : value, bits);
    }
  }
  return "?";
}

/// Appends the segments covering buffer range [from, to) to `out`, positions from `at`.
void add_segments(const BufferLayout& b, const std::vector<std::int64_t>& param_ids,
                  std::int64_t from, std::int64_t to, std::int64_t at, std::vector<Segment>& out) {
  auto it = std::upper_bound(b.params.begin(), b.params.end(), from,
                             [](std::int64_t x, const ParamSlot& p) { return x < p.end; });
  std::int64_t cursor = from;
  for (; it != b.params.end() && it->start < to; ++it) {
    if (it->start > cursor) {
      out.push_back({at + (cursor - from), it->start - cursor, -1, 0});
      cursor = it->start;
    }
    const std::int64_t end = std::min(it->end, to);
    out.push_back({at + (cursor - from), end - cursor,
                   param_ids[static_cast<std::size_t>(it - b.params.begin())], cursor - it->start});
    cursor = end;
  }
  if (cursor < to) out.push_back({at + (cursor - from), to - cursor, -1, 0});
}

}  // namespace

ValueRule sent_values(const Round& round, std::int64_t device, const Segment& s) {
  const std::int64_t per_device = round.ranks_per_device();
  return value_rule(round.kind == RoundKind::params, round.encoding, s.param, round.dp,
                    device * per_device, (device + 1) * per_device);
}

ValueRule expected_values(const Round& round, const Segment& s) {
  return value_rule(round.kind == RoundKind::params, round.encoding, s.param, round.dp, 0,
                    round.dp);
}

Result<void> run_data_pass(const Layout& layout, const Manifest& manifest, Backend& backend,
                           const VerifyOptions& options, VerifyReport& report) {
  std::unordered_map<std::string_view, std::int64_t> manifest_position;
  for (std::size_t i = 0; i < manifest.params.size(); ++i) {
    manifest_position.emplace(manifest.params[i].name, static_cast<std::int64_t>(i));
  }

  VerifyProgress progress;
  std::int64_t largest_block = 1;
  for (const BufferLayout& b : layout.buffers) {
    progress.buckets += b.buckets.size();
    // Fits: verify_layout refused a layout whose elements do not add up in 64 bits.
    progress.elements += b.numel;
    for (const BucketRange& bucket : b.buckets) {
      const std::int64_t shards = b.num_shards.value_or(1);
      const std::int64_t g = std::gcd(shards, backend.devices());
      largest_block = std::max(largest_block, bucket.size() / g);
    }
  }
  const std::int64_t block_limit = options.max_block_elements > 0
                                       ? options.max_block_elements
                                       : backend.preferred_block_elements();
  if (Result<void> r = backend.reserve(std::min(largest_block, block_limit)); !r) return r;
  if (options.progress) options.progress(progress);

  for (std::size_t bi = 0; bi < layout.buffers.size(); ++bi) {
    const BufferLayout& b = layout.buffers[bi];
    std::vector<std::int64_t> param_ids(b.params.size());
    for (std::size_t k = 0; k < b.params.size(); ++k)
      param_ids[k] = manifest_position.at(b.params[k].name);
    // An unpadded buffer is all-reduced whole by plain DDP; as a data pass it is one shard.
    const std::int64_t dp = b.num_shards.value_or(1);
    const std::int64_t devices = std::gcd(dp, backend.devices());

    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const BucketRange& bucket = b.buckets[j];
      BucketReport& out = report.buckets.emplace_back();
      out.buffer = bi;
      out.bucket = static_cast<std::int64_t>(j);
      out.ranks = dp;
      out.devices = devices;
      out.elements = bucket.size();
      const std::int64_t block = bucket.size() / devices;
      const std::int64_t shard = bucket.size() / dp;
      std::unordered_map<std::int64_t, std::int64_t> bad_params;  // param id -> rank

      for (std::int64_t offset = 0; offset < block; offset += block_limit) {
        const std::int64_t length = std::min(block_limit, block - offset);
        ++out.chunks;
        for (RoundKind kind : {RoundKind::grads, RoundKind::params}) {
          Round round;
          round.kind = kind;
          round.encoding =
              encoding_of(kind == RoundKind::grads ? b.key.grad_dtype : b.key.param_dtype);
          round.dp = dp;
          round.devices = devices;
          round.length = length;
          for (std::int64_t h = 0; h < devices; ++h) {
            const std::int64_t from = bucket.start + h * block + offset;
            add_segments(b, param_ids, from, from + length, h * length, round.all_blocks);
            add_segments(b, param_ids, from, from + length, 0, round.own_block.emplace_back());
          }
          Result<double> filled = backend.fill(round);
          if (!filled) return filled.error();
          Result<double> seconds = backend.collective(round);
          if (!seconds) return seconds.error();
          Result<CheckResult> checked = backend.check(round);
          if (!checked) return checked.error();

          const double bytes =
              static_cast<double>(devices * length) * encoding_bytes(round.encoding);
          // Every device writes G + 1 blocks (its send and receive buffers) and compares
          // one block (grads) or G blocks (params).
          out.fill_seconds += *filled;
          out.check_seconds += checked->seconds;
          out.filled_bytes += bytes * static_cast<double>(devices + 1);
          out.checked_bytes +=
              kind == RoundKind::grads ? bytes : bytes * static_cast<double>(devices);
          if (kind == RoundKind::grads) {
            out.grad_mismatches += checked->mismatches;
            out.reduce_scatter_seconds += *seconds;
            out.reduce_scatter_bytes += bytes;
          } else {
            out.param_mismatches += checked->mismatches;
            out.all_gather_seconds += *seconds;
            out.all_gather_bytes += bytes;
          }
          report.mismatches += checked->mismatches;
          for (const Mismatch& m : checked->first) {
            // Where the received position lies in the buffer, and which rank received it.
            std::int64_t in_bucket = 0;
            std::int64_t rank = 0;
            if (kind == RoundKind::grads) {
              in_bucket = m.device * block + offset + m.position;
              rank = in_bucket / shard;
            } else {
              in_bucket = (m.position / length) * block + offset + m.position % length;
              rank = m.device * round.ranks_per_device();
            }
            if (m.param >= 0 && b.strategy == Strategy::layerwise)
              bad_params.emplace(m.param, rank);
            if (report.first_mismatches.size() >= kKeptMismatches) continue;
            ElementMismatch& e = report.first_mismatches.emplace_back();
            e.buffer = bi;
            e.bucket = out.bucket;
            e.round = kind == RoundKind::grads ? "grads (reduce-scatter)" : "params (all-gather)";
            e.rank = rank;
            e.param = m.param >= 0 ? std::string(manifest.params[m.param].name) : std::string();
            e.element = m.element;
            e.offset = bucket.start + in_bucket;
            e.expected = bits_text(m.expected, round.encoding);
            e.received = bits_text(m.received, round.encoding);
          }
        }
        progress.elements_done += devices * length;
        if (options.progress) options.progress(progress);
      }
      for (const auto& [param, rank] : bad_params) {
        out.incomplete_params.push_back(
            fmt::format("{} (rank {})", manifest.params[param].name, rank));
      }
      std::sort(out.incomplete_params.begin(), out.incomplete_params.end());
      ++progress.buckets_done;
      if (options.progress) options.progress(progress);
    }
  }
  return {};
}

}  // namespace paramlayout::verify

namespace paramlayout {

double BucketReport::algbw() const {
  return seconds() > 0 ? (reduce_scatter_bytes + all_gather_bytes) / seconds() : 0;
}

double BucketReport::busbw() const {
  return devices > 0 ? algbw() * static_cast<double>(devices - 1) / static_cast<double>(devices)
                     : 0;
}

Result<VerifyReport> verify_layout(const Layout& layout, const Manifest& manifest,
                                   const VerifyOptions& options) {
  return VerifySession(options).verify(layout, manifest);
}

VerifySession::VerifySession(VerifyOptions options) : options_(std::move(options)) {}
VerifySession::VerifySession(VerifySession&&) noexcept = default;
VerifySession& VerifySession::operator=(VerifySession&&) noexcept = default;
VerifySession::~VerifySession() = default;

Result<VerifyReport> VerifySession::verify(const Layout& layout, const Manifest& manifest) {
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report;
  report.violations = check_layout(layout, manifest);
  if (!report.violations.empty()) return report;
  std::optional<std::int64_t> elements = 0;
  for (const BufferLayout& b : layout.buffers) {
    if (elements) elements = checked_add(*elements, b.numel);
  }
  if (!elements || (options_.max_elements > 0 && *elements > options_.max_elements)) {
    return Error{
        fmt::format("{}: the data pass would move {} elements, more than the limit of {} "
                    "(--max-elements raises it)",
                    layout.source.empty() ? "layout" : layout.source,
                    elements ? group_digits(*elements) : std::string("over 2^63"),
                    group_digits(options_.max_elements))};
  }
  if (!backend_) {
    Result<std::unique_ptr<verify::Backend>> started = start_backend(report.notes);
    if (!started) return started.error();
    backend_ = std::move(*started);
  }
  report.backend = backend_->describe();
  report.devices = backend_->devices();
  if (Result<void> r = verify::run_data_pass(layout, manifest, *backend_, options_, report); !r) {
    return r.error();
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Result<std::unique_ptr<verify::Backend>> VerifySession::start_backend(
    std::vector<std::string>& notes) {
  verify::Peers* peers = options_.processes ? &options_.processes->peers() : nullptr;
  if (!peers) peers = (solo_ = verify::solo_peers()).get();
  const bool several = peers->size() > 1;
  if (several && options_.backend == BackendChoice::cpu) {
    return Error{"the cpu backend runs in one process, but " + std::to_string(peers->size()) +
                 " were launched: use --backend nccl (one GPU per process), or run without "
                 "the MPI launcher"};
  }
  if (several && options_.gpus > 0) {
    return Error{
        "--gpus is for one process driving several GPUs; under an MPI launcher "
        "each process takes one GPU"};
  }
  if (options_.backend != BackendChoice::cpu) {
    Result<std::unique_ptr<verify::Backend>> nccl =
        verify::make_nccl_backend(options_.gpus, options_.timeout_seconds, *peers);
    if (nccl) return std::move(*nccl);
    if (options_.backend == BackendChoice::nccl || several) return nccl.error();
    notes.push_back(nccl.error().message + "; using the cpu backend");
  }
  return verify::make_cpu_backend(options_.gpus > 0 ? options_.gpus : 2);
}

ProcessGroup::ProcessGroup(std::unique_ptr<verify::Peers> peers) : peers_(std::move(peers)) {}
ProcessGroup::ProcessGroup(ProcessGroup&&) noexcept = default;
ProcessGroup& ProcessGroup::operator=(ProcessGroup&&) noexcept = default;
ProcessGroup::~ProcessGroup() = default;

Result<ProcessGroup> ProcessGroup::join() {
  Result<std::unique_ptr<verify::Peers>> peers = verify::join_peers();
  if (!peers) return peers.error();
  return ProcessGroup(std::move(*peers));
}

int ProcessGroup::rank() const { return peers_->rank(); }
int ProcessGroup::size() const { return peers_->size(); }

std::optional<std::string> ProcessGroup::first_failure(const std::optional<std::string>& mine) {
  return peers_->first_failure(mine);
}

bool ProcessGroup::all_agree(const std::string& mine) {
  const std::vector<std::string> all = peers_->all_gather(mine);
  return std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == mine; });
}

}  // namespace paramlayout
