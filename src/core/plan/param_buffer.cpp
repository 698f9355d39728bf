// Where Megatron-LM's DDP keeps a buffer's quantized params (docs/strategies.md, Quantized
// params in DDP's buffers). Upstream: Megatron-LM d98e8a64, Transformer Engine 4329ff84.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "paramlayout/plan.hpp"

namespace paramlayout {
namespace {

/// Offsets are computed 128 bits wide: a hand-edited layout's params may add up past 64.
__extension__ typedef __int128 Wide;

}  // namespace

Result<ParamBufferLayout> quantized_param_buffer(const BufferLayout& buffer,
                                                 const Manifest& manifest,
                                                 const PlanOptions& options) {
  std::unordered_map<std::string_view, std::size_t> position;
  for (std::size_t i = 0; i < manifest.params.size(); ++i) {
    position.emplace(manifest.params[i].name, i);
  }
  const auto storage_of = [&](const ParamSlot& slot) {
    const auto it = position.find(slot.name);
    return it == position.end() ? Storage::dense : manifest.params[it->second].storage;
  };
  // param_and_grad_buffer.py:1121-1127 and 1160-1184: the distributed optimizer's buffers
  // (sequential-dp, and layerwise ones, whose DDP config training.py:2262-2263 sets to it)
  // are padded and own a param buffer; plain DDP's are not and do not.
  const bool distributed = buffer.strategy != Strategy::unpadded;
  ParamBufferLayout out;
  bool nvfp4 = false;
  for (const ParamSlot& slot : buffer.params) {
    const Storage s = storage_of(slot);
    // param_and_grad_buffer.py:1162-1179: with any MXFP8Tensor in the buffer (TE2's
    // QuantizedTensor, fp8_utils.py:134-136), one buffer of grad_dtype serves both; the
    // param buffer is its bfloat16 view (its first half for float32 grads).
    if (s == Storage::mxfp8 && distributed) out.in_grad_buffer = true;
    nvfp4 = nvfp4 || s == Storage::nvfp4;
  }
  if (!nvfp4) return out;

  // param_and_grad_buffer.py:1105-1111, 1437-1522 (_compute_nvfp4_packed_layout): the
  // params in the order DDP was given them, reversed (manifest order, reversed), each start
  // aligned to 64 and each bucket's end padded as the primary layout's, NVFP4 params taking
  // half their numel (two values a byte), the others their numel.
  std::vector<std::size_t> order(buffer.params.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  const auto manifest_position = [&](std::size_t k) {
    const auto it = position.find(buffer.params[k].name);
    return it == position.end() ? manifest.params.size() : it->second;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return manifest_position(a) > manifest_position(b);
  });
  const Wide divisor =
      bucket_divisor(buffer.num_shards.value_or(1), options.pad_for_high_nccl_busbw);
  const auto pad_start = [&](Wide v) { return distributed ? align_param_start(v) : v; };
  const auto pad_end = [&](Wide v) { return distributed ? pad_to(v, divisor) : v; };
  constexpr Wide kMax = std::numeric_limits<std::int64_t>::max();
  Wide largest = 0;
  const auto narrow = [&](Wide v) {
    largest = std::max(largest, v);
    return static_cast<std::int64_t>(std::min(v, kMax));
  };

  out.packed = true;
  out.params.resize(buffer.params.size());
  Wide start = 0;
  Wide bucket_start = 0;
  std::int64_t bucket = 0;
  for (const std::size_t k : order) {
    const ParamSlot& slot = buffer.params[k];
    Wide numel = slot.numel();
    if (storage_of(slot) == Storage::nvfp4) {
      const Param& p = manifest.params[position.at(slot.name)];
      // param_and_grad_buffer.py:1497-1499 and fp4_utils.py:74 (the packed rowwise shape).
      if (numel % 2 != 0 || (!p.shape.empty() && p.shape.back() % 2 != 0)) {
        return Error{fmt::format(
            "{}: param \"{}\": nvfp4 packs two values a byte, so its last dimension must be "
            "even (Megatron-LM param_and_grad_buffer.py:1497-1499, fp4_utils.py:74)",
            manifest.source, slot.name)};
      }
      numel /= 2;
    }
    start = pad_start(start);
    if (slot.bucket != bucket) {
      const Wide end = pad_end(start);
      out.buckets.push_back({narrow(bucket_start), narrow(end), narrow(start - bucket_start)});
      bucket_start = end;
      start = bucket_start;
      bucket = slot.bucket;
    }
    ParamSlot& packed = out.params[k];
    packed = slot;
    packed.start = narrow(start);
    packed.end = narrow(start + numel);
    start += numel;
  }
  if (start > bucket_start) {
    out.buckets.push_back(
        {narrow(bucket_start), narrow(pad_end(start)), narrow(start - bucket_start)});
  }
  if (largest > kMax) {
    return Error{fmt::format("{}: a {} buffer: its packed nvfp4 offsets do not fit in 64 bits",
                             manifest.source, describe(buffer.key))};
  }
  // param_and_grad_buffer.py:1518-1521.
  if (out.buckets.size() != buffer.buckets.size()) {
    return Error{fmt::format(
        "{}: a {} buffer: Megatron-LM's packed nvfp4 layout gives {} buckets for the buffer's "
        "{} (param_and_grad_buffer.py:1518, which fails)",
        manifest.source, describe(buffer.key), out.buckets.size(), buffer.buckets.size())};
  }
  out.numel = out.buckets.empty() ? 0 : out.buckets.back().end;
  return out;
}

}  // namespace paramlayout
