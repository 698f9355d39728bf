// A step's traffic and time per rank. Ranks are placed as Megatron-LM places them, tp
// fastest then cp, ep, dp, pp (megatron/training/initialize.py:395, order 'tp-cp-ep-dp-pp'),
// so a group whose ranks span at most a node's GPUs talks over the node's links.
#include "paramlayout/step_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "paramlayout/activations.hpp"

namespace paramlayout {
namespace {

/// Per-rank bytes of a ring collective of `bytes` over `ranks`: (ranks - 1) / ranks of it for
/// an all-gather, a reduce-scatter or an all-to-all; `passes` of them.
double ring_bytes(double bytes, std::int64_t ranks, double passes) {
  return ranks <= 1 ? 0
                    : passes * bytes * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
}

/// The layers one stage's chunks hold (decoder and multi-token prediction layers).
std::vector<LayerSpec> stage_layers(const JobSpec& job, const JobPlan& plan, std::int64_t stage) {
  std::vector<LayerSpec> layers;
  for (const JobChunk& c : plan.chunks) {
    if (c.placement.stage != stage) continue;
    const std::vector<LayerSpec> chunk = chunk_layers(job.model, c.placement);
    layers.insert(layers.end(), chunk.begin(), chunk.end());
  }
  return layers;
}

/// Elements of one attention layer's K and V per token on one tensor-parallel rank, as
/// context parallelism's ring passes them.
double kv_elements(const JobSpec& job, const LayerSpec& layer) {
  const ModelSpec& m = job.model;
  const double tp = static_cast<double>(job.parallel.tp);
  if (m.mla) {
    const double heads = static_cast<double>(m.attention_heads(layer)) / tp;
    return heads *
           static_cast<double>(m.mla->qk_head_dim + m.mla->qk_pos_emb_head_dim + m.mla->v_head_dim);
  }
  const double groups = std::max(1.0, static_cast<double>(m.query_groups(layer)) / tp);
  return 2 * groups * static_cast<double>(m.head_dim(layer));
}

/// The params each token meets: dense params once per tensor-parallel rank, routed experts'
/// params as top-k of every expert (norms and biases tp replicates are counted per rank).
double active_params(const JobSpec& job, const JobPlan& plan) {
  double dense = 0;
  double experts = 0;
  for (const JobChunk& c : plan.chunks) {
    for (const BufferStats& b : c.stats.buffers) {
      (b.key.expert_parallel ? experts : dense) += static_cast<double>(b.param_elements);
    }
  }
  dense *= static_cast<double>(job.parallel.tp);
  const MoeSpec& moe = job.model.moe;
  if (moe.num_experts > 0) {
    experts *= static_cast<double>(job.parallel.ep * job.parallel.etp) *
               static_cast<double>(job.activations.moe_router_topk) /
               static_cast<double>(moe.num_experts);
  }
  return dense + experts;
}

/// Seconds to send `bytes` at `gbps`.
double seconds(double bytes, double gbps) { return bytes * 8 / (gbps * 1e9); }

std::int64_t saturated(double bytes) {
  return bytes >= 9.2e18 ? std::int64_t{9'200'000'000'000'000'000} : std::llround(bytes);
}

}  // namespace

std::int64_t StepTraffic::total() const {
  return data_parallel + tensor_parallel + context_parallel + expert_parallel + pipeline;
}

Result<StepEstimate> estimate_step(const JobSpec& job, const JobPlan& plan,
                                   const LinkModel& links) {
  const ActivationOptions& a = job.activations;
  if (a.seq_length <= 0) return Error{"a step's estimate needs --seq-length"};
  const ParallelConfig& p = job.parallel;
  const auto link = [&](std::int64_t span) {
    return span <= links.gpus_per_node ? links.intra_node_gbps : links.link_gbps;
  };
  const double m = static_cast<double>(microbatches_per_step(job));
  const double sp_tp = a.sequence_parallel ? static_cast<double>(p.tp) : 1.0;
  // Tokens of one micro-batch on one context-parallel rank; activations in the params' dtype.
  const double tokens =
      static_cast<double>(a.seq_length * a.micro_batch_size) / static_cast<double>(p.cp);
  const double act_bytes = job.param_dtype == DType::float32 ? 4 : 2;
  const double hidden = static_cast<double>(job.model.hidden_size) * tokens * act_bytes;
  // Forward passes per micro-batch: full recompute runs each layer's forward twice.
  const double forwards = a.recompute == Recompute::full ? 2 : 1;

  StepEstimate best;
  bool first = true;
  for (std::int64_t stage = 0; stage < p.pp; ++stage) {
    StepTraffic t;
    double comm = 0;
    for (const JobChunk& c : plan.chunks) {
      if (c.placement.stage != stage) continue;
      for (std::size_t i = 0; i < c.stats.buffers.size(); ++i) {
        const BufferStats& b = c.stats.buffers[i];
        // With several distributed optimizer instances, each rank's shard of the grads is
        // all-reduced across them after the reduce-scatter (param_and_grad_buffer.py:734-760).
        const std::int64_t shards = c.layout.buffers[i].num_shards.value_or(1);
        const double across =
            ring_bytes(static_cast<double>(b.bytes_per_rank.grads) / static_cast<double>(shards),
                       job.optimizer_instances, 2);
        const double sent = static_cast<double>(b.traffic.sent_bytes) + across;
        t.data_parallel += saturated(sent);
        const std::int64_t span =
            b.key.expert_parallel ? job.world_size / p.pp : p.tp * p.cp * job.dp;
        comm += seconds(sent, link(span));
      }
    }
    double tensor = 0, context = 0, expert = 0, expert_tensor = 0;
    for (const LayerSpec& layer : stage_layers(job, plan, stage)) {
      // Korthikanti et al. 2022, 4.2.2: each of the attention and MLP blocks all-reduces
      // (or, sequence parallel, all-gathers and reduce-scatters) s x b x h once forward and
      // once backward: 2 (t - 1) / t of it per rank each time. MoE layers' experts talk
      // through the dispatcher instead.
      const double blocks = (layer.mixer != Mixer::none ? 1 : 0) +
                            (layer.mlp == Mlp::dense || layer.mlp == Mlp::linear ? 1 : 0);
      tensor += ring_bytes(hidden, p.tp, 2 * blocks * (forwards + 1));
      if (layer.attends()) {
        // Ring attention (--cp-comm-type p2p, arguments.py:3221): forward passes each K, V
        // block cp - 1 times; backward passes K, V and their grads.
        const double kv = kv_elements(job, layer) * tokens * act_bytes;
        context += p.cp <= 1 ? 0 : kv * static_cast<double>(p.cp - 1) * (forwards + 2);
      }
      if (layer.mlp == Mlp::moe) {
        // The all-to-all dispatcher sends each token to its top-k experts and back, forward
        // and backward (moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher).
        const double routed = hidden / sp_tp * static_cast<double>(a.moe_router_topk);
        expert += ring_bytes(routed, p.ep, 2 * (forwards + 1));
        // With expert tensor parallelism the tokens each rank received are all-gathered
        // over the expert tensor-parallel group and their outputs reduce-scattered back
        // (token_dispatcher.py:741-751, 824-832, over the expert tensor-parallel group).
        expert_tensor += ring_bytes(routed * static_cast<double>(p.etp), p.etp, 2 * (forwards + 1));
      }
    }
    t.tensor_parallel = saturated(tensor * m);
    t.context_parallel = saturated(context * m);
    t.expert_parallel = saturated((expert + expert_tensor) * m);
    // Each virtual chunk sends its output forward and its input's grad backward per
    // micro-batch (sequence parallel: a tensor-parallel rank's share).
    t.pipeline = p.pp <= 1 ? 0 : saturated(2 * static_cast<double>(p.vpp) * m * hidden / sp_tp);
    comm += seconds(static_cast<double>(t.tensor_parallel), link(p.tp)) +
            seconds(static_cast<double>(t.context_parallel), link(p.tp * p.cp)) +
            seconds(expert * m, link(p.etp * p.ep)) + seconds(expert_tensor * m, link(p.etp)) +
            seconds(static_cast<double>(t.pipeline), link(job.world_size));
    if (first || comm > best.communication_seconds) {
      best.stage = stage;
      best.traffic = t;
      best.communication_seconds = comm;
      first = false;
    }
  }
  // 6 FLOPs per param and token (2 forward, 4 backward; Kaplan et al. 2020, 2.1), 8 with
  // full recompute's second forward.
  const double step_tokens = static_cast<double>(a.global_batch_size * a.seq_length);
  best.compute_seconds = (4 + 2 * forwards) * active_params(job, plan) * step_tokens /
                         (static_cast<double>(job.world_size) * links.gpu_tflops * 1e12);
  // Narayanan et al. 2021, 2.2: the bubble is (p - 1) / m of the ideal time, (p - 1) / (v m)
  // interleaved.
  best.bubble_fraction = static_cast<double>(p.pp - 1) / (static_cast<double>(p.vpp) * m);
  best.bubble_seconds = best.bubble_fraction * best.compute_seconds;
  return best;
}

}  // namespace paramlayout
