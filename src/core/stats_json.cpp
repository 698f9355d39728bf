#include <fmt/format.h>

#include "json_writer.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

std::string stats_to_json(const LayoutStats& s) {
  std::string text;
  json::Writer w(text);
  w.raw("{\"param_elements\": ").integer(s.param_elements)
      .raw(", \"padding\": ").integer(s.padding)
      .raw(", \"floor_padding\": ").integer(s.floor_padding)
      .raw(", \"padding_percent\": ").raw(fmt::format("{:.4f}", s.padding_percent()))
      .raw(", \"floor_percent\": ").raw(fmt::format("{:.4f}", s.floor_percent()))
      .raw(", \"cost_imbalance\": ").raw(fmt::format("{:.6f}", s.cost_imbalance))
      .raw(", \"cost_imbalance_bound\": ").raw(fmt::format("{:.6f}", s.cost_imbalance_bound))
      .raw(", \"bytes_per_rank\": {\"params\": ").integer(s.param_bytes)
      .raw(", \"grads\": ").integer(s.grad_bytes)
      .raw(", \"optimizer\": ").integer(s.optimizer_bytes)
      .raw("}}");
  return text;
}

}  // namespace paramlayout
