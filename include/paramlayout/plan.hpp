// Planning: manifest + options -> layout (docs/strategies.md).
#pragma once

#include "paramlayout/error.hpp"
#include "paramlayout/grouping.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// Plans every buffer. Fails only when an offset would not fit in 64 bits.
Result<Layout> plan(const Manifest& manifest, const PlanOptions& options);

/// Where Megatron-LM's DDP keeps the params of `buffer`, planned from `manifest` (its
/// params' storage) under `options`: in the grad buffer when one is mxfp8, at packed offsets
/// when one is nvfp4 (docs/strategies.md, Quantized params in DDP's buffers). Fails when an
/// nvfp4 param's last dimension is odd (two values a byte). A param the manifest lacks counts
/// as dense.
Result<ParamBufferLayout> quantized_param_buffer(const BufferLayout& buffer,
                                                 const Manifest& manifest,
                                                 const PlanOptions& options);

}  // namespace paramlayout
