// Upstream references are Megatron-LM d98e8a64.
#include "job/optimizer_charge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace paramlayout {
namespace {

using ParamIndex = std::unordered_map<std::string_view, const Param*>;

ParamIndex index_params(const Manifest& manifest) {
  ParamIndex index;
  for (const Param& p : manifest.params) index.emplace(p.name, &p);
  return index;
}

Error too_large(const ChunkPlacement& at) {
  return Error{fmt::format("stage {} chunk {}: its optimizer state per rank is too large", at.stage,
                           at.chunk)};
}

/// The most param elements one rank's shard of `b` holds: the distributed optimizer keeps
/// state for the param ranges of its shard, never for padding (shard_main_param,
/// distrib_optimizer.py:412-467).
std::int64_t heaviest_shard_elements(const BufferLayout& b) {
  const std::int64_t shards = b.num_shards.value_or(1);
  std::vector<std::int64_t> owned(static_cast<std::size_t>(shards), 0);
  for (const ParamSlot& slot : b.params) {
    if (slot.end <= slot.start) continue;
    const BucketRange& bucket = b.buckets[static_cast<std::size_t>(slot.bucket)];
    for (const ShardPiece& piece : shard_pieces(bucket, shards, slot.start, slot.end)) {
      owned[static_cast<std::size_t>(piece.rank)] += piece.end - piece.start;
    }
  }
  return owned.empty() ? 0 : *std::max_element(owned.begin(), owned.end());
}

/// The heaviest rank's optimizer bytes for buffer `b` of a chunk.
Result<std::int64_t> buffer_state(const JobSpec& job, const ChunkPlacement& at,
                                  const BufferLayout& b, const ParamIndex& params) {
  const OptimizerOptions& o = job.optimizer;
  std::vector<const Param*> ps;
  for (const ParamSlot& slot : b.params) {
    auto found = params.find(slot.name);
    if (found == params.end()) {
      return Error{fmt::format("stage {} chunk {}: {} is in the layout but not the manifest",
                               at.stage, at.chunk, slot.name)};
    }
    ps.push_back(found->second);
  }
  if (b.strategy == Strategy::sequential_dp && b.key.expert_parallel &&
      job.strategy == Strategy::layerwise && !ps.empty()) {
    return Error{fmt::format(
        "stage {} chunk {}: {} is an expert-parallel param the emerging optimizer leaves to "
        "{}: Megatron-LM's optimizer refuses those with the layer-wise param layout "
        "(optimizer/__init__.py:918-926: they would need a distributed optimizer over the "
        "expert data-parallel group); give --disable-bias-linear if they are biases, or "
        "--no-use-layer-wise-param-layout",
        at.stage, at.chunk, ps.front()->name, to_string(param_optimizer(o, *ps.front())))};
  }
  if (b.strategy == Strategy::sequential_dp) {
    // The distributed optimizer's shard: one optimizer per buffer, the same
    // bytes for every param element it owns.
    Param vector;
    vector.shape = {1};
    const ParamOptimizer optimizer = param_optimizer(o, vector);  // the scalar optimizer's
    for (const Param* p : ps) {
      if (const ParamOptimizer mine = param_optimizer(o, *p); mine != optimizer) {
        return Error{fmt::format(
            "stage {} chunk {}: {} goes to {} but lies in a buffer the distributed optimizer "
            "shards (it is marked use_muon=False): Megatron-LM's distributed optimizer finds it "
            "in none of its param groups (distrib_optimizer.py:334), the layer-wise one in none "
            "of its layouts (layer_wise_optimizer.py:694-699)",
            at.stage, at.chunk, p->name, to_string(mine))};
      }
    }
    const std::optional<std::int64_t> bytes = checked_mul(
        heaviest_shard_elements(b), optimizer_state_bytes(o, optimizer, StateHolder::distributed,
                                                          b.key.param_dtype, b.key.grad_dtype)
                                        .total());
    if (!bytes) return too_large(at);
    return *bytes;
  }
  // Whole params: each rank's own under the layer-wise optimizer (the shard its
  // start lies in, layer_wise_optimizer.py:660-683), every one without the
  // distributed optimizer.
  const std::int64_t shards = b.strategy == Strategy::layerwise ? b.num_shards.value_or(1) : 1;
  std::vector<std::int64_t> per_rank(static_cast<std::size_t>(shards), 0);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const ParamSlot& slot = b.params[i];
    const std::int64_t rank = shards == 1
                                  ? 0
                                  : owner_ranks(b.buckets[static_cast<std::size_t>(slot.bucket)],
                                                shards, slot.start, slot.end)
                                        .first;
    const std::optional<std::int64_t> bytes = param_state_bytes(
        o, *ps[i], StateHolder::whole_params, b.key.param_dtype, b.key.grad_dtype, slot.numel());
    if (!bytes || !checked_add(per_rank[static_cast<std::size_t>(rank)], *bytes)) {
      return too_large(at);
    }
    per_rank[static_cast<std::size_t>(rank)] += *bytes;
  }
  return *std::max_element(per_rank.begin(), per_rank.end());
}

}  // namespace

Result<void> charge_optimizer_state(const JobSpec& job, JobPlan& plan,
                                    std::span<const std::size_t> planned_as) {
  for (std::size_t k = 0; k < plan.chunks.size(); ++k) {
    JobChunk& c = plan.chunks[k];
    if (k < planned_as.size() && planned_as[k] != k) {
      const std::vector<BufferStats>& same = plan.chunks[planned_as[k]].stats.buffers;
      for (std::size_t i = 0; i < same.size(); ++i) {
        c.stats.buffers[i].bytes_per_rank.optimizer = same[i].bytes_per_rank.optimizer;
      }
      continue;
    }
    const ParamIndex params = index_params(c.manifest);
    for (std::size_t i = 0; i < c.layout.buffers.size(); ++i) {
      Result<std::int64_t> bytes = buffer_state(job, c.placement, c.layout.buffers[i], params);
      if (!bytes) return bytes.error();
      c.stats.buffers[i].bytes_per_rank.optimizer = *bytes;
    }
  }
  const OptimizerOptions& o = job.optimizer;
  if (o.cpu_offload && o.offload_fraction < 1) {
    if (Result<void> r = charge_offload_kept(job, plan); !r) return r;
  } else if (job.strategy == Strategy::unpadded && o.distributed && o.name != "adam" &&
             o.name != "sgd") {
    if (Result<void> r = charge_dealt_params(job, plan); !r) return r;
  }
  for (JobChunk& c : plan.chunks) {
    BytesPerRank total;
    for (const BufferStats& b : c.stats.buffers) {
      if (!total.add(b.bytes_per_rank)) return too_large(c.placement);
    }
    c.stats.bytes_per_rank = total;
  }
  return {};
}

}  // namespace paramlayout
