// What HybridDeviceOptimizer keeps on the GPU when --optimizer-offload-fraction
// is below 1. Upstream references are Megatron-LM d98e8a64.
//
// The distributed optimizer hands HybridDeviceOptimizer the shards its rank
// owns, group by group (distrib_optimizer.py:778-781): the groups in
// _get_param_groups' order (the default group first, then the override tuples
// sorted, __init__.py:373-374), in each group the float32 shards before the
// 16-bit ones (:485-495), each kind in buffer order, bucket by bucket, by
// offset (:330-337, param_index_map's order). HybridDeviceOptimizer then moves
// params to the host, in that order, while fewer than fraction x the total have
// moved (hybrid_optimizer.py:258-276): the last ones keep their state on the
// GPU. Each of Megatron- LM's optimizers does this on its own: the dense one
// and the expert one, over all the stage's model chunks (or the first chunk
// apart with
// --overlap-param-gather-with-optimizer-step, __init__.py:1063-1068).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "job/optimizer_charge.hpp"

namespace paramlayout {
namespace {

/// The param's group in _get_param_groups' order under Megatron-LM's standard
/// overrides
/// (__init__.py:94-130): 0 no override; 1 the decoupled learning rate; 2 it
/// with no weight decay; 3 no weight decay (1-D params and biases, but q/k
/// layernorms with
/// --apply-wd-to-qk-layernorm).
int group_order(const OptimizerOptions& o, const Param& p) {
  const std::string_view name = p.name;
  const bool bias = name.ends_with(".bias");
  bool no_decay = p.shape.size() == 1 || bias;
  if (o.wd_on_qk_layernorm) {
    no_decay = no_decay && name.find("q_layernorm.") == std::string_view::npos &&
               name.find("k_layernorm.") == std::string_view::npos;
  }
  const bool decoupled = o.decoupled_lr && p.embedding_or_output;
  return decoupled ? (no_decay ? 2 : 1) : (no_decay ? 3 : 0);
}

/// One rank's shard of one param, in HybridDeviceOptimizer's order.
struct Piece {
  std::int64_t rank = 0;
  int group = 0;
  bool sixteen_bit = false;
  std::size_t chunk = 0;
  std::size_t buffer = 0;
  std::int64_t start = 0;
  std::int64_t elements = 0;
  int kept_bytes = 0;  ///< per element, when it stays on the GPU

  auto order() const { return std::tie(rank, group, sixteen_bit, chunk, buffer, start); }
};

}  // namespace

Result<void> charge_offload_kept(const JobSpec& job, JobPlan& plan) {
  const OptimizerOptions& o = job.optimizer;
  // One HybridDeviceOptimizer per (stage, expert, apart): its pieces.
  std::map<std::tuple<std::int64_t, bool, bool>, std::vector<Piece>> optimizers;
  for (std::size_t ci = 0; ci < plan.chunks.size(); ++ci) {
    const JobChunk& c = plan.chunks[ci];
    std::unordered_map<std::string_view, const Param*> params;
    for (const Param& p : c.manifest.params) params.emplace(p.name, &p);
    const bool apart = job.overlap_param_gather_with_optimizer_step && c.placement.chunk == 0;
    for (std::size_t bi = 0; bi < c.layout.buffers.size(); ++bi) {
      const BufferLayout& b = c.layout.buffers[bi];
      const std::int64_t shards = b.num_shards.value_or(1);
      const int kept = offload_kept_bytes(b.key.param_dtype, b.key.grad_dtype).total();
      const bool sixteen_bit = b.key.param_dtype != DType::float32;
      std::vector<Piece>& pieces = optimizers[{c.placement.stage, b.key.expert_parallel, apart}];
      for (const ParamSlot& slot : b.params) {
        const Param& p = *params.at(slot.name);
        const BucketRange& bucket = b.buckets[static_cast<std::size_t>(slot.bucket)];
        for (const ShardPiece& s : shard_pieces(bucket, shards, slot.start, slot.end)) {
          pieces.push_back(
              {s.rank, group_order(o, p), sixteen_bit, ci, bi, s.start, s.end - s.start, kept});
        }
      }
    }
  }
  for (auto& [key, pieces] : optimizers) {
    std::sort(pieces.begin(), pieces.end(),
              [](const Piece& a, const Piece& b) { return a.order() < b.order(); });
    // Each rank's kept bytes per (chunk, buffer); the heaviest rank's are
    // charged.
    std::map<std::pair<std::size_t, std::size_t>, std::int64_t> heaviest;
    std::int64_t heaviest_total = -1;
    for (std::size_t i = 0; i < pieces.size();) {
      std::size_t end = i;
      std::int64_t total = 0;
      while (end < pieces.size() && pieces[end].rank == pieces[i].rank) {
        total += pieces[end++].elements;
      }
      const double threshold = static_cast<double>(total) * o.offload_fraction;
      std::int64_t offloaded = 0;
      std::int64_t kept_total = 0;
      std::map<std::pair<std::size_t, std::size_t>, std::int64_t> kept;
      for (std::size_t k = i; k < end; ++k) {
        const Piece& p = pieces[k];
        if (static_cast<double>(offloaded) < threshold) {
          offloaded += p.elements;
          continue;
        }
        const std::optional<std::int64_t> bytes = checked_mul(p.elements, p.kept_bytes);
        if (!bytes || !checked_add(kept_total, *bytes)) {
          return Error{
              fmt::format("stage {}: its optimizer state per rank is too large", std::get<0>(key))};
        }
        kept_total += *bytes;
        kept[{p.chunk, p.buffer}] += *bytes;
      }
      if (kept_total > heaviest_total) {
        heaviest_total = kept_total;
        heaviest = std::move(kept);
      }
      i = end;
    }
    for (const auto& [at, bytes] : heaviest) {
      plan.chunks[at.first].stats.buffers[at.second].bytes_per_rank.optimizer = bytes;
    }
  }
  return {};
}

}  // namespace paramlayout
