// The layer-wise optimizer without a param layout (--no-use-layer-wise-param-layout): whole
// params dealt out to the data-parallel ranks by size. Upstream references are Megatron-LM
// d98e8a64.
//
// _get_megatron_emerging_optimizer builds one optimizer per optimizer name over the param
// groups of _get_param_groups (optimizer/__init__.py:816-822, 882-965): each group holds the
// params with one set of overrides (the emerging optimizer's routing to Adam, weight decay,
// decoupled learning rate) in model order, the groups sorted by their overrides, none first
// (:373-374); the optimizers come in the order their names first appear. The layer-wise
// optimizer takes all their groups in that order, sorts the params by size (a stable sort)
// and deals them out ping-pong, 0..n-1 then n-1..0, the expert-parallel ones over the expert
// data-parallel ranks on their own (layer_wise_optimizer.py:713-760).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "job/optimizer_charge.hpp"

namespace paramlayout {
namespace {

/// The param's overrides as _get_param_groups sorts them (tuples of (key, value) sorted by
/// key: max_lr, min_lr < optimizer < wd_mult): 0 none; then decoupled lr (L), L + optimizer,
/// L + optimizer + no decay, L + no decay, optimizer, optimizer + no decay, no decay.
int override_order(const OptimizerOptions& o, const Param& p, bool fallback) {
  const std::string_view name = p.name;
  bool no_decay = p.shape.size() == 1 || name.ends_with(".bias");  // __init__.py:114-118
  if (o.wd_on_qk_layernorm) {
    no_decay = no_decay && name.find("q_layernorm.") == std::string_view::npos &&
               name.find("k_layernorm.") == std::string_view::npos;
  }
  const bool decoupled = o.decoupled_lr && p.embedding_or_output;
  if (decoupled) return fallback ? (no_decay ? 3 : 2) : (no_decay ? 4 : 1);
  if (fallback) return no_decay ? 6 : 5;
  return no_decay ? 7 : 0;
}

struct Dealt {
  const Param* param = nullptr;
  std::size_t chunk = 0;
  std::size_t buffer = 0;
  std::int64_t bytes = 0;
};

}  // namespace

Result<void> charge_dealt_params(const JobSpec& job, JobPlan& plan) {
  const OptimizerOptions& o = job.optimizer;
  Param matrix;
  matrix.shape = {2, 2};
  const ParamOptimizer main = param_optimizer(o, matrix);  // the emerging optimizer
  for (std::int64_t stage = 0; stage < job.parallel.pp; ++stage) {
    // The stage's params in model order, their group and where their bytes go.
    struct Grouped {
      ParamOptimizer optimizer;
      int order;
      bool expert;
    };
    std::vector<std::pair<Grouped, Dealt>> params;
    for (std::size_t ci = 0; ci < plan.chunks.size(); ++ci) {
      const JobChunk& c = plan.chunks[ci];
      if (c.placement.stage != stage) continue;
      std::unordered_map<std::string_view, std::size_t> buffer_of;
      for (std::size_t bi = 0; bi < c.layout.buffers.size(); ++bi) {
        for (const ParamSlot& slot : c.layout.buffers[bi].params) buffer_of[slot.name] = bi;
      }
      for (const Param& p : c.manifest.params) {
        const std::size_t bi = buffer_of.at(p.name);
        const BufferKey& key = c.layout.buffers[bi].key;
        const std::optional<std::int64_t> bytes = param_state_bytes(
            o, p, StateHolder::whole_params, key.param_dtype, key.grad_dtype, p.numel);
        if (!bytes) {
          return Error{fmt::format("stage {}: its optimizer state per rank is too large", stage)};
        }
        const ParamOptimizer optimizer = param_optimizer(o, p);
        params.push_back({{optimizer, override_order(o, p, optimizer != main), p.expert_parallel},
                          {&p, ci, bi, *bytes}});
      }
    }
    // Groups: (overrides, expert) in the order first met, sorted by overrides; optimizers in
    // the order their names first appear among the sorted groups.
    std::map<std::pair<int, bool>, std::size_t> first_met;
    for (std::size_t i = 0; i < params.size(); ++i) {
      first_met.try_emplace({params[i].first.order, params[i].first.expert}, i);
    }
    std::vector<std::pair<int, bool>> groups;
    for (const auto& [key, first] : first_met) groups.push_back(key);
    std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
      return std::make_pair(a.first, first_met[a]) < std::make_pair(b.first, first_met[b]);
    });
    const auto optimizer_of = [&](const std::pair<int, bool>& g) {
      return params[first_met[g]].first.optimizer;  // one optimizer per group
    };
    std::vector<ParamOptimizer> optimizers;
    for (const auto& g : groups) {
      if (std::find(optimizers.begin(), optimizers.end(), optimizer_of(g)) == optimizers.end()) {
        optimizers.push_back(optimizer_of(g));
      }
    }
    std::map<std::pair<int, bool>, std::size_t> group_rank;  // the layer-wise optimizer's order
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const auto opt = std::find(optimizers.begin(), optimizers.end(), optimizer_of(groups[gi]));
      group_rank[groups[gi]] =
          static_cast<std::size_t>(opt - optimizers.begin()) * groups.size() + gi;
    }
    std::vector<std::pair<std::size_t, std::size_t>> order;  // (group rank, model order)
    for (std::size_t i = 0; i < params.size(); ++i) {
      order.emplace_back(group_rank[{params[i].first.order, params[i].first.expert}], i);
    }
    std::sort(order.begin(), order.end());
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return params[a.second].second.param->numel < params[b.second].second.param->numel;
    });
    // Deal: dense and expert params over their own ranks.
    for (const bool expert : {false, true}) {
      const std::int64_t ranks = expert ? job.expert_shards() : job.dense_shards();
      std::vector<std::int64_t> total(static_cast<std::size_t>(ranks), 0);
      std::vector<std::map<std::pair<std::size_t, std::size_t>, std::int64_t>> by_buffer(
          static_cast<std::size_t>(ranks));
      std::int64_t next = 0;
      for (const auto& [group, i] : order) {
        if (params[i].first.expert != expert) continue;
        const Dealt& d = params[i].second;
        const std::int64_t step = next++ % (2 * ranks);
        const auto rank = static_cast<std::size_t>(step < ranks ? step : 2 * ranks - 1 - step);
        if (!checked_add(total[rank], d.bytes)) {
          return Error{fmt::format("stage {}: its optimizer state per rank is too large", stage)};
        }
        total[rank] += d.bytes;
        by_buffer[rank][{d.chunk, d.buffer}] += d.bytes;
      }
      const auto heaviest = std::max_element(total.begin(), total.end()) - total.begin();
      for (std::size_t ci = 0; ci < plan.chunks.size(); ++ci) {
        JobChunk& c = plan.chunks[ci];
        if (c.placement.stage != stage) continue;
        for (std::size_t bi = 0; bi < c.layout.buffers.size(); ++bi) {
          if (c.layout.buffers[bi].key.expert_parallel != expert) continue;
          const auto found = by_buffer[static_cast<std::size_t>(heaviest)].find({ci, bi});
          c.stats.buffers[bi].bytes_per_rank.optimizer =
              found == by_buffer[static_cast<std::size_t>(heaviest)].end() ? 0 : found->second;
        }
      }
    }
  }
  return {};
}

}  // namespace paramlayout
