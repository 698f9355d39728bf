// Rotary embeddings: models/common/embeddings/rotary_pos_embedding.py and
// yarn_rotary_pos_embedding.py, built by gpt_model.py:183-225, hybrid_model.py:251-275,
// multi_latent_attention.py:181-201 and dsa.py:1134-1152; routers: transformer/moe/router.py.
#include "paramlayout/model_buffers.hpp"

#include <algorithm>
#include <functional>
#include <vector>

namespace paramlayout {
namespace {

constexpr std::int64_t kFp32 = 4;
/// The forward of RotaryEmbedding and of YarnRotaryEmbedding is an lru_cache(maxsize=32) of
/// its own, shared by every instance of the class (rotary_pos_embedding.py:177,
/// yarn_rotary_pos_embedding.py:159): it keeps the table each returned.
constexpr std::size_t kCachedTables = 32;
/// MLATransformerConfig's original_max_position_embeddings, which no argument sets
/// (transformer_config.py:3318).
constexpr std::int64_t kMlaOriginalMaxPositions = 4096;

/// What a rank's buffers scale with.
struct Context {
  std::int64_t seq_per_cp = 0;  ///< the sequence a forward's table covers on one CP rank
  std::int64_t cp = 1;
  std::int64_t float_bytes = kFp32;  ///< 2 under Float16Module, which casts float buffers
  bool training_seq = false;         ///< the launch gave --seq-length
};

/// One rotary embedding module.
struct Rotary {
  RotaryKind kind = RotaryKind::none;
  std::int64_t kv_channels = 0;
  double percent = 1.0;
  std::int64_t original_max_positions = 4096;  ///< yarn's
  bool fused_cos_sin = false;  ///< multi-latent attention's fused yarn: get_cached_cos_sin
};

/// Frequencies torch.arange(0, dim, 2) makes: ceil(dim / 2).
std::int64_t half(std::int64_t dim) { return (dim + 1) / 2; }

/// rotary_pos_embedding.py:72-74: the head dim the rotary part turns.
std::int64_t rotary_dim(const Rotary& r) {
  if (r.percent >= 1.0) return r.kv_channels;
  return static_cast<std::int64_t>(static_cast<double>(r.kv_channels) * r.percent);
}

/// A table [positions / cp, 1, 1, 2 x ceil(dim / 2)] (get_emb, cut to this CP rank by
/// get_pos_emb_on_this_cp_rank).
std::int64_t table(std::int64_t positions_per_cp, std::int64_t dim, std::int64_t bytes) {
  return positions_per_cp * 2 * half(dim) * bytes;
}

/// The module's own tensors, and the size of the table its cached forward keeps (0: none).
struct RotaryBytes {
  std::int64_t own = 0;
  std::int64_t cached_table = 0;
};

RotaryBytes rotary_bytes(const Rotary& r, const Context& x) {
  RotaryBytes out;
  out.own = half(rotary_dim(r)) * kFp32;  // inv_freq, a plain fp32 attribute (:78-80)
  if (r.kind == RotaryKind::mrope) return out;
  if (r.kind == RotaryKind::rope) {
    if (x.training_seq) out.cached_table = table(x.seq_per_cp, rotary_dim(r), kFp32);
    return out;
  }
  // Yarn: inv_freq_extra and inv_freq_inter over the whole head dim (:79-87), and cos_cached
  // and sin_cached, registered at init over the original positions in fp32 (:98-100, 201-206)
  // and cast by Float16Module; the init clears the forward's cache (:104).
  const std::int64_t d = r.kv_channels;
  out.own += 2 * half(d) * kFp32;
  std::int64_t cos_sin = 2 * table(r.original_max_positions / x.cp, d, x.float_bytes);
  const bool recached =
      x.training_seq && (x.float_bytes != kFp32 || x.seq_per_cp * x.cp > r.original_max_positions);
  if (!r.fused_cos_sin) {
    if (x.training_seq) out.cached_table = table(x.seq_per_cp, d, kFp32);
  } else if (recached) {
    // get_cached_cos_sin (:208-237) registers them again in the activations' dtype when its
    // length or dtype differs, through the cached forward.
    cos_sin = 2 * table(x.seq_per_cp, d, x.float_bytes);
    out.cached_table = table(x.seq_per_cp, d, kFp32);
  }
  out.own += cos_sin;
  return out;
}

/// Each router's registered buffers (router.py:180-258), as they stand after a forward:
/// Float16Module casts them to 16 bits, _maintain_float32_expert_bias (:262-279) makes
/// expert_bias, qb_beta and qb_beta_accum fp32 again.
std::int64_t router_bytes(const JobSpec& job, const Context& x) {
  const std::int64_t experts = job.model.moe.num_experts;
  std::int64_t bytes = 0;
  if (job.model.moe.router_expert_bias) bytes += experts * (kFp32 + x.float_bytes);
  if (job.buffers.router_global_aux_loss) bytes += (experts + 1) * x.float_bytes;
  if (job.buffers.router_quantile_balancing) bytes += experts * 2 * kFp32 + 8;
  return bytes;
}

/// The rotary embeddings one chunk builds.
std::vector<Rotary> chunk_rotaries(const JobSpec& job, const std::vector<LayerSpec>& layers) {
  const ModelSpec& m = job.model;
  const ModelBufferOptions& o = job.buffers;
  std::vector<Rotary> out;
  const bool mla = m.mla.has_value();
  const bool mrope = o.rotary == RotaryKind::mrope && !m.hybrid;
  if ((o.rotary == RotaryKind::rope && !mla) || o.rotary == RotaryKind::yarn || (mrope && !mla)) {
    out.push_back({o.rotary, m.head_dim(), m.rotary_percent, o.yarn_original_max_positions, false});
  }
  if (!mla) return out;
  const bool yarn = o.mla_rotary == RotaryKind::yarn;
  const Rotary layer_rotary{o.mla_rotary, m.mla->qk_pos_emb_head_dim, yarn ? 1.0 : m.rotary_percent,
                            kMlaOriginalMaxPositions, yarn && o.rope_fusion};
  for (const LayerSpec& l : layers) {
    if (!l.attends()) continue;
    out.push_back(layer_rotary);
    if (m.dsa && !l.shares_topk) {  // the indexer's: never fused
      Rotary indexer = layer_rotary;
      indexer.fused_cos_sin = false;
      out.push_back(indexer);
    }
  }
  return out;
}

/// The tables a class's forward cache keeps of `tables`: all, or the 32 largest.
std::int64_t cached(std::vector<std::int64_t> tables) {
  std::sort(tables.begin(), tables.end(), std::greater<>());
  if (tables.size() > kCachedTables) tables.resize(kCachedTables);
  std::int64_t sum = 0;
  for (std::int64_t t : tables) sum += t;
  return sum;
}

}  // namespace

MemoryTerm model_buffers(const JobSpec& job, const JobPlan& plan, std::int64_t stage) {
  const ActivationOptions& a = job.activations;
  Context x;
  x.cp = job.parallel.cp;
  x.seq_per_cp = a.seq_length / job.parallel.cp;
  x.training_seq = a.seq_length > 0;
  x.float_bytes = job.param_dtype == DType::float32 ? kFp32 : 2;
  std::int64_t bytes = 0;
  std::vector<std::int64_t> rope_tables, yarn_tables;
  for (const JobChunk& c : plan.chunks) {
    if (c.placement.stage != stage) continue;
    const std::vector<LayerSpec> layers = chunk_layers(job.model, c.placement);
    for (const LayerSpec& l : layers) {
      if (l.mlp == Mlp::moe) bytes += router_bytes(job, x);
    }
    for (const Rotary& r : chunk_rotaries(job, layers)) {
      const RotaryBytes b = rotary_bytes(r, x);
      bytes += b.own;
      if (b.cached_table > 0) {
        (r.kind == RotaryKind::yarn ? yarn_tables : rope_tables).push_back(b.cached_table);
      }
    }
  }
  bytes += cached(rope_tables) + cached(yarn_tables);
  return {"model_buffers", bytes, Exactness::exact};
}

}  // namespace paramlayout
