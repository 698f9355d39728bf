// The per-buffer layout strategies of Megatron-LM's DistributedDataParallel: plain DDP and
// the distributed optimizer's. The layerwise strategy is a module of its own (layerwise/).
#pragma once

#include "strategies/buffer_builder.hpp"

namespace paramlayout::strategies {

/// Plain DDP: params back to back in backprop order, no padding; a bucket closes once it
/// holds bucket_size elements.
void lay_out_unpadded(const BufferJob& job, BufferBuilder& out);

/// The distributed optimizer's: each param starts on a multiple of 64 elements, a bucket
/// closes once it holds bucket_size elements (or at a shared embedding, which gets its own)
/// and is padded to a multiple of bucket_divisor.
void lay_out_sequential_dp(const BufferJob& job, BufferBuilder& out);

}  // namespace paramlayout::strategies
