// The tensors Megatron-LM's modules allocate beside the params and keep between steps: each
// rotary embedding's frequencies and the tables it caches, each MoE router's registered
// buffers (megatron/core at the targeted commit; file:line in docs/memory.md).
#pragma once

#include <cstdint>

#include "paramlayout/job.hpp"
#include "paramlayout/memory_term.hpp"

namespace paramlayout {

/// Bytes of `stage`'s model buffers on one of its ranks, as they stand after the first step
/// (term key "model_buffers"). Where a rank has more rotary embeddings of one class than its
/// forward's cache keeps (32), and their tables differ in size, the 32 largest count.
MemoryTerm model_buffers(const JobSpec& job, const JobPlan& plan, std::int64_t stage);

}  // namespace paramlayout
