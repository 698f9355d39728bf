#include "paramlayout/memory_term.hpp"

#include <limits>

namespace paramlayout {

std::string_view to_string(Exactness exactness) {
  return exactness == Exactness::exact ? "exact" : "estimate";
}

const std::vector<MemoryTermInfo>& memory_terms() {
  static const std::vector<MemoryTermInfo> terms{
      {"param_buffers",
       "DDP's param buffers, padding included (without the distributed optimizer, the params' "
       "own tensors)",
       "distributed/param_and_grad_buffer.py: _ParamAndGradBuffer", Exactness::exact},
      {"grad_buffers", "DDP's grad buffers, padding included",
       "distributed/param_and_grad_buffer.py: _ParamAndGradBuffer", Exactness::exact},
      {"optimizer_state", "the optimizer's main params and state, this rank's shard",
       "optimizer/distrib_optimizer.py, optimizer/optimizer.py", Exactness::exact},
      {"model_buffers",
       "tensors the model's modules keep beside the params: rotary frequencies and cached "
       "tables, the routers' registered buffers",
       "models/common/embeddings/rotary_pos_embedding.py, transformer/moe/router.py",
       Exactness::exact},
      {"decoder_layers", "the decoder layers' saved activations, every micro-batch in flight",
       "Korthikanti et al. 2022, Table 2; pipeline_parallel/schedules.py:953-965",
       Exactness::estimate},
      {"embedding", "token ids and the embedding's dropout mask",
       "training/theoretical_memory_usage.py:331-342", Exactness::estimate},
      {"output_and_loss", "final norm and output layer inputs, the loss's fp32 logits",
       "training/theoretical_memory_usage.py:369-376", Exactness::estimate},
      {"recompute_working_set", "one recomputed group's activations during backward",
       "transformer/transformer_block.py: _checkpointed_forward", Exactness::estimate},
  };
  return terms;
}

const MemoryTermInfo* find_memory_term(std::string_view key) {
  for (const MemoryTermInfo& t : memory_terms()) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

std::optional<std::int64_t> total_bytes(const std::vector<MemoryTerm>& terms) {
  std::int64_t sum = 0;
  for (const MemoryTerm& t : terms) {
    if (t.bytes < 0 || t.bytes > std::numeric_limits<std::int64_t>::max() - sum) {
      return std::nullopt;
    }
    sum += t.bytes;
  }
  return sum;
}

}  // namespace paramlayout
