// Activations per rank, from Korthikanti et al. 2022 ("Reducing Activation Recomputation in
// Large Transformer Models", section 4 and Table 2), generalized to the layer's own shapes
// (grouped query attention, gated MLPs, experts), 16-bit activations; the pipeline schedule's
// micro-batches in flight from megatron/core/pipeline_parallel/schedules.py:953-965.
#include "paramlayout/activations.hpp"
#include "paramlayout/model_chunk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace paramlayout {
namespace {

/// The shapes one rank's activations scale with.
struct Shape {
  double s = 0;  ///< sequence per context-parallel rank
  double b = 0;  ///< micro batch
  double h = 0;
  double t = 1;
  bool sp = false;
  /// Tensors every tensor-parallel rank holds whole without sequence parallelism.
  double replicated(double bytes) const { return sp ? bytes / t : bytes; }
};

/// Bytes one decoder layer saves for backward, without full recompute.
double attention_bytes(const ModelSpec& m, const LayerSpec& layer, const Shape& x,
                       const ActivationOptions& o) {
  const double sb = x.s * x.b;
  const double heads = static_cast<double>(m.attention_heads(layer));
  double q = 0, kv = 0, v_out = 0;
  if (m.mla) {
    q = heads * static_cast<double>(m.mla->qk_head_dim + m.mla->qk_pos_emb_head_dim);
    kv = q + heads * static_cast<double>(m.mla->v_head_dim);
    v_out = heads * static_cast<double>(m.mla->v_head_dim);
  } else {
    const double d = static_cast<double>(m.head_dim(layer));
    q = heads * d;
    // Local attention repeats K and V to every head before the matmuls that save them
    // (dot_product_attention.py:169-175, repeat_interleave copies); fused attention keeps
    // one per query group.
    const double kv_heads = m.local_spec ? heads : static_cast<double>(m.query_groups(layer));
    kv = 2 * kv_heads * d;
    v_out = heads * d;
  }
  // Table 2: the QKV input (2sbh) and the output's dropout mask (sbh) are whole on every
  // tensor-parallel rank unless sequence parallel; Q, K, V and linear_proj's input are split.
  double bytes = x.replicated(3 * sb * x.h) + 2 * sb * (q + kv + v_out) / x.t;
  // The unfused softmax (local DotProductAttention) saves its output, dropout mask and
  // dropout output (5as^2b); fused and flash attention (Transformer Engine) save none.
  const bool selective = o.recompute == Recompute::selective && o.recompute_core_attention;
  if (m.local_spec && !selective) bytes += 5 * heads * x.s * x.s * x.b / x.t;
  return bytes;
}

/// An MLP of `ffn` columns over `tokens` tokens: input, fc1's output, the activation's output.
double mlp_bytes(const ModelSpec& m, double tokens, double ffn, const Shape& x) {
  const double fc1 = m.gated_linear_unit ? 2 * ffn : ffn;
  return 2 * tokens * (fc1 + ffn) / x.t;
}

/// The tokens a rank's experts take for the `tokens` the rank routes. Dropless: on average
/// over the expert-parallel group, top-k for each (gathered over expert tensor parallel).
/// With a capacity factor each expert keeps at most get_capacity(tokens x k, E, factor) =
/// ceil(tokens x k / E x factor) of each rank's (moe_utils.py:248-266, router.py:793-800),
/// exactly that many when padded to capacity (token_dispatcher.py:517-530, 1113-1127).
double expert_tokens(const ActivationOptions& o, double tokens, double experts) {
  const double routed = static_cast<double>(o.moe_router_topk) * tokens;
  if (o.moe_capacity_factor <= 0) return routed;
  const double capacity = std::ceil(routed / experts * o.moe_capacity_factor);
  return o.moe_pad_to_capacity ? experts * capacity : std::min(routed, experts * capacity);
}

double layer_bytes(const ModelSpec& m, const LayerSpec& layer, const Shape& x,
                   const ActivationOptions& o) {
  const double sb = x.s * x.b;
  double bytes = x.replicated(4 * sb * x.h);  // the two norms' inputs
  if (layer.attends()) {
    bytes += attention_bytes(m, layer, x, o);
  }
  const bool mlp_recomputed = o.recompute == Recompute::selective && o.recompute_mlp;
  if (layer.mlp == Mlp::dense) {
    bytes += x.replicated(3 * sb * x.h);  // fc1's input and the output's dropout mask
    if (!mlp_recomputed) {
      bytes += mlp_bytes(m, sb, static_cast<double>(m.dense_ffn(layer)), x);
    }
  } else if (layer.mlp == Mlp::moe) {
    const double experts = static_cast<double>(m.moe.num_experts);
    const double tokens = expert_tokens(o, x.replicated(sb), experts);
    bytes += x.replicated(3 * sb * x.h + 4 * sb * experts);  // input, mask; fp32 logits
    bytes += 2 * tokens * x.h;  // the permuted tokens, each expert's input
    bytes += mlp_bytes(m, tokens * x.t, static_cast<double>(m.moe.ffn_hidden_size), x);
    if (m.moe.shared_expert_size > 0) {
      bytes += mlp_bytes(m, sb, static_cast<double>(m.moe.shared_expert_size), x);
    }
  }
  return bytes;
}

/// A layer under full recompute keeps only its input (2sbh): Megatron-LM's checkpointed
/// forward saves the hidden states entering each group of recomputed layers.
double checkpointed_input_bytes(const Shape& x) { return x.replicated(2 * x.s * x.b * x.h); }

/// What one micro-batch of one chunk holds, term by term.
struct ChunkBytes {
  double layers = 0;
  double embedding = 0;
  double output = 0;
  double recompute_working_set = 0;  ///< one group recomputed during backward
};

ChunkBytes chunk_bytes(const JobSpec& job, const ChunkPlacement& c, const Shape& x) {
  const ModelSpec& m = job.model;
  const ActivationOptions& o = job.activations;
  const std::vector<LayerSpec> layers = chunk_layers(m, c);
  ChunkBytes out;
  const auto n = static_cast<std::int64_t>(layers.size());
  const std::int64_t group = std::max<std::int64_t>(1, o.recompute_num_layers);
  double group_bytes = 0;  // the uniform method's group being summed
  for (std::int64_t i = 0; i < n; ++i) {
    const double full = layer_bytes(m, layers[static_cast<std::size_t>(i)], x, o);
    if (o.recompute != Recompute::full) {
      out.layers += full;
    } else if (o.method == RecomputeMethod::block) {
      // transformer_block.py _checkpointed_forward: the first recompute_num_layers layers of
      // the chunk are recomputed, the others keep everything.
      out.layers += i < group ? checkpointed_input_bytes(x) : full;
      if (i < group) out.recompute_working_set = std::max(out.recompute_working_set, full);
    } else {
      // Uniform: each group of recompute_num_layers keeps its input; backward recomputes
      // one group at a time, the largest deciding the working set.
      if (i % group == 0) {
        out.layers += checkpointed_input_bytes(x);
        group_bytes = 0;
      }
      group_bytes += full;
      out.recompute_working_set = std::max(out.recompute_working_set, group_bytes);
    }
  }
  const double sb = x.s * x.b;
  const double vocab = static_cast<double>(padded_vocab_size(m, job.parallel.tp));
  const double mtp = static_cast<double>(c.mtp_layers.size());
  if (c.pre_process) out.embedding = 8 * sb + x.replicated(sb * x.h);  // ids, dropout mask
  if (c.post_process || mtp > 0) {
    // The final norm's and output layer's inputs, and the fp32 logits cross-entropy keeps
    // (theoretical_memory_usage.py:369-376: 4sbh(1 + v/h)); once more for each MTP layer.
    const double heads = (c.post_process ? 1 : 0) + mtp;
    out.output = heads * (x.replicated(4 * sb * x.h) + 4 * sb * vocab / x.t);
  }
  return out;
}

/// Micro-batches of `chunks` chunks in flight on `stage` at its first backward.
std::int64_t units_in_flight(const JobSpec& job, std::int64_t stage, std::int64_t microbatches) {
  const std::int64_t p = job.parallel.pp, v = job.parallel.vpp;
  if (p == 1) return 1;  // forward_backward_no_pipelining: one micro-batch at a time
  if (v == 1) return std::min(p - stage, microbatches);
  // Interleaved: (p - rank - 1) * 2 + (v - 1) * group size (pp by default), then one more.
  return std::min(microbatches * v, (p - stage - 1) * 2 + (v - 1) * p + 1);
}

MemoryTerm estimate(std::string key, double bytes) {
  return {std::move(key), std::llround(bytes), Exactness::estimate};
}

}  // namespace

std::int64_t microbatches_per_step(const JobSpec& job) {
  const std::int64_t per_step = job.activations.micro_batch_size * job.dp;
  return std::max<std::int64_t>(1, job.activations.global_batch_size / per_step);
}

Result<std::vector<StageActivations>> estimate_activations(const JobSpec& job,
                                                           const JobPlan& plan) {
  std::vector<StageActivations> out;
  const ActivationOptions& o = job.activations;
  const Shape x{static_cast<double>(o.seq_length) / static_cast<double>(job.parallel.cp),
                static_cast<double>(o.micro_batch_size), static_cast<double>(job.model.hidden_size),
                static_cast<double>(job.parallel.tp), o.sequence_parallel};
  const std::int64_t microbatches = microbatches_per_step(job);
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) {
    StageActivations s{stage, 0, {}};
    if (o.seq_length == 0) {
      out.push_back(std::move(s));
      continue;
    }
    std::vector<ChunkBytes> chunks;
    for (const JobChunk& c : plan.chunks) {
      if (c.placement.stage == stage) chunks.push_back(chunk_bytes(job, c.placement, x));
    }
    const std::int64_t units = units_in_flight(job, stage, microbatches);
    s.microbatches_in_flight = units;
    ChunkBytes held;
    const std::int64_t p = job.parallel.pp;
    for (std::int64_t k = 0; k < units; ++k) {
      const ChunkBytes& c =
          chunks[static_cast<std::size_t>((k / p) % std::max<std::int64_t>(1, job.parallel.vpp)) %
                 chunks.size()];
      held.layers += c.layers;
      held.embedding += c.embedding;
    }
    for (const ChunkBytes& c : chunks) {
      held.output = std::max(held.output, c.output);  // the loss is taken one micro-batch at a time
      held.recompute_working_set = std::max(held.recompute_working_set, c.recompute_working_set);
    }
    const double largest = 4.0 * static_cast<double>(std::numeric_limits<std::int64_t>::max() / 8);
    if (held.layers + held.embedding + held.output + held.recompute_working_set > largest) {
      return Error{"the activation estimate of stage " + std::to_string(stage) +
                   " does not fit in 64 bits"};
    }
    s.terms.push_back(estimate("decoder_layers", held.layers));
    if (held.embedding > 0) s.terms.push_back(estimate("embedding", held.embedding));
    if (held.output > 0) s.terms.push_back(estimate("output_and_loss", held.output));
    if (held.recompute_working_set > 0) {
      s.terms.push_back(estimate("recompute_working_set", held.recompute_working_set));
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace paramlayout
