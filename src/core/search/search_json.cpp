#include <fmt/format.h>

#include "format/json_writer.hpp"
#include "paramlayout/search.hpp"

namespace paramlayout {
namespace {

void write_strings(json::Writer& w, const std::vector<std::string>& items) {
  w.raw("[");
  for (std::size_t i = 0; i < items.size(); ++i) w.raw(i > 0 ? ", " : "").quoted(items[i]);
  w.raw("]");
}

void write_number(json::Writer& w, double value) { w.raw(fmt::format("{:.6g}", value)); }

void write_candidate(json::Writer& w, const SearchRequest& request, const SearchCandidate& c,
                     const SearchBudget& budget) {
  const ParallelConfig& p = c.parallel;
  std::vector<std::string> line = request.args;
  line.insert(line.end(), c.added_args.begin(), c.added_args.end());
  w.raw("{\"tp\": ").integer(p.tp).raw(", \"pp\": ").integer(p.pp);
  w.raw(", \"vpp\": ").integer(p.vpp).raw(", \"cp\": ").integer(p.cp);
  w.raw(", \"ep\": ").integer(p.ep).raw(", \"etp\": ").integer(p.etp);
  w.raw(", \"dp\": ").integer(c.dp).raw(", \"expert_dp\": ").integer(c.expert_dp);
  w.raw(", \"sequence_parallel\": ").boolean(c.sequence_parallel);
  w.raw(", \"recompute\": ").quoted(to_string(c.recompute));
  w.raw(", \"distributed_optimizer\": ").boolean(c.distributed_optimizer);
  w.raw(", \"optimizer_instances\": ").integer(c.optimizer_instances);
  w.raw(", \"added_args\": ");
  write_strings(w, c.added_args);
  w.raw(", \"args\": ");
  write_strings(w, line);
  w.raw(", \"heaviest_stage\": ").integer(c.heaviest.stage);
  w.raw(", \"persistent_bytes\": ").integer(c.heaviest.persistent_bytes);
  w.raw(", \"activation_bytes\": ").integer(c.heaviest.activation_bytes);
  w.raw(", \"peak_bytes\": ").integer(c.heaviest.peak_bytes);
  w.raw(", \"fits\": ");
  if (budget.gpu_bytes) {
    w.boolean(fits(c, *budget.gpu_bytes, budget.headroom));
  } else {
    w.raw("null");
  }
  const StepTraffic& t = c.step.traffic;
  w.raw(", \"step\": {\"stage\": ").integer(c.step.stage);
  w.raw(", \"traffic_bytes\": {\"data_parallel\": ").integer(t.data_parallel);
  w.raw(", \"tensor_parallel\": ").integer(t.tensor_parallel);
  w.raw(", \"context_parallel\": ").integer(t.context_parallel);
  w.raw(", \"expert_parallel\": ").integer(t.expert_parallel);
  w.raw(", \"pipeline\": ").integer(t.pipeline).raw("}, \"compute_seconds\": ");
  write_number(w, c.step.compute_seconds);
  w.raw(", \"communication_seconds\": ");
  write_number(w, c.step.communication_seconds);
  w.raw(", \"bubble_fraction\": ");
  write_number(w, c.step.bubble_fraction);
  w.raw(", \"step_seconds\": ");
  write_number(w, c.step.step_seconds());
  w.raw("}}");
}

}  // namespace

std::string search_to_json(const SearchRequest& request, const SearchResult& result,
                           const SearchBudget& budget, RankBy rank_by) {
  std::string out;
  json::Writer w(out);
  constexpr std::string_view kRankBy[] = {"time", "memory", "traffic", "bubble"};
  w.raw("{\"world_size\": ").integer(request.world_size);
  w.raw(", \"planned\": ").integer(result.planned);
  w.raw(", \"accepted\": ").integer(static_cast<std::int64_t>(result.candidates.size()));
  std::int64_t refused = 0;
  for (const RejectedReason& r : result.rejected) refused += r.count;
  w.raw(", \"refused\": ").integer(refused);
  w.raw(", \"interrupted\": ").boolean(result.interrupted);
  w.raw(", \"rank_by\": ").quoted(kRankBy[static_cast<std::size_t>(rank_by)]);
  w.raw(", \"gpu\": ");
  if (budget.gpu_bytes) {
    w.raw("{\"name\": ").quoted(budget.gpu_name).raw(", \"bytes\": ").integer(*budget.gpu_bytes);
    w.raw(", \"headroom_bytes\": ").integer(budget.headroom).raw("}");
  } else {
    w.raw("null");
  }
  const LinkModel& l = request.links;
  w.raw(", \"links\": {\"intra_node_gbps\": ");
  write_number(w, l.intra_node_gbps);
  w.raw(", \"link_gbps\": ");
  write_number(w, l.link_gbps);
  w.raw(", \"gpus_per_node\": ").integer(l.gpus_per_node).raw(", \"gpu_tflops\": ");
  write_number(w, l.gpu_tflops);
  w.raw("}, \"candidates\": [");
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    w.raw(i > 0 ? ", " : "");
    write_candidate(w, request, result.candidates[i], budget);
  }
  w.raw("], \"rejected\": [");
  for (std::size_t i = 0; i < result.rejected.size(); ++i) {
    const RejectedReason& r = result.rejected[i];
    w.raw(i > 0 ? ", " : "").raw("{\"reason\": ").quoted(r.reason);
    w.raw(", \"count\": ").integer(r.count).raw(", \"example\": ").quoted(r.example).raw("}");
  }
  w.raw("]}");
  return out;
}

}  // namespace paramlayout
