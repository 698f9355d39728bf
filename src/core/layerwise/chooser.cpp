#include "layerwise/balanced.hpp"
#include "layerwise/layerwise.hpp"
#include "layerwise/megatron.hpp"

namespace paramlayout::layerwise {
namespace {

/// `packing` written into `out`; an error where an offset does not fit in 64 bits.
Result<void> write_layout(const BufferJob& job, const Packing& packing, BufferLayout& out) {
  BufferBuilder builder(job, out);
  write(job, packing, builder);
  return builder.finish();
}

/// Each rank's cost in `layout`, written from `packing` (params' costs `cost`).
std::vector<Cost> rank_costs_of(const BufferLayout& layout, const Packing& packing,
                                const std::vector<Cost>& cost) {
  return rank_costs(layout, slot_costs(packing, cost));
}

}  // namespace

Result<void> Chooser::lay_out(const BufferJob& job, std::size_t index, BufferLayout& out) {
  Result<std::vector<Cost>> cost = newton_schulz_costs(job);
  if (!cost) return cost.error();
  Result<Packing> megatron = pack_megatron(job, *cost);
  if (!megatron) return megatron.error();
  if (packer_ == Packer::megatron) return write_layout(job, *megatron, out);

  BufferLayout megatron_layout = out;
  if (Result<void> r = write_layout(job, *megatron, megatron_layout); !r) return r;
  const std::vector<Cost> megatron_costs = rank_costs_of(megatron_layout, *megatron, *cost);
  add_rank_costs(megatron_, megatron_costs);
  kept_.resize(megatron_.size(), 0);
  // With the heaviest rank so far, the balanced packing's sums must stay within 127 bits.
  Cost total = 0;
  for (const Cost c : megatron_costs) total = saturating_add(total, c);
  if (saturating_add(heaviest(kept_), total) < kMaxCost) {
    if (const std::optional<Packing> balanced = pack_balanced(job, *cost, *megatron)) {
      if (Result<void> r = write_layout(job, *balanced, out); !r) return r;
      add_rank_costs(kept_, rank_costs_of(out, *balanced, *cost));
      megatron_layouts_.emplace_back(index, std::move(megatron_layout));
      return {};
    }
  }
  add_rank_costs(kept_, megatron_costs);
  out = std::move(megatron_layout);
  return {};
}

std::optional<Packing> Chooser::pack_balanced(const BufferJob& job, const std::vector<Cost>& cost,
                                              const Packing& megatron) const {
  // No larger than Megatron-LM's, no rank heavier than under Megatron-LM's packing of every
  // buffer so far: the tighter search first, then plain best-fit (whose ranks can come out
  // lighter).
  const Wide limit = megatron.size(job.group.num_shards);
  for (const bool search : {true, false}) {
    if (std::optional<Packing> packing =
            layerwise::pack_balanced(job, cost, limit, kept_, heaviest(megatron_), search)) {
      return packing;
    }
  }
  return std::nullopt;
}

void Chooser::settle(std::vector<BufferLayout>& buffers) {
  if (heaviest(kept_) <= heaviest(megatron_)) return;
  for (auto& [index, layout] : megatron_layouts_) buffers[index] = std::move(layout);
  megatron_layouts_.clear();
  kept_ = megatron_;
}

}  // namespace paramlayout::layerwise
