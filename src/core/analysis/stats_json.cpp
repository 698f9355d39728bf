#include <fmt/format.h>

#include "figures_json.hpp"

namespace paramlayout {
namespace {

void write_traffic(json::Writer& w, const LayoutStats& s) {
  w.raw("{");
  write_traffic_members(w, s.traffic);
  w.raw(", \"buffers\": [");
  const char* sep = "";
  for (const BufferStats& b : s.buffers) {
    const BufferTraffic& bt = b.traffic;
    w.raw(sep)
        .raw("{\"buffer\": ")
        .quoted(describe(b.key))
        .raw(", \"ranks\": ")
        .integer(bt.ranks)
        .raw(", \"buckets\": ")
        .integer(bt.buckets)
        .raw(", \"smallest_bucket\": ")
        .integer(bt.smallest_bucket)
        .raw(", \"largest_bucket\": ")
        .integer(bt.largest_bucket)
        .raw(", \"reduce_scatter_bytes\": ")
        .integer(bt.reduce_scatter_bytes)
        .raw(", \"all_gather_bytes\": ")
        .integer(bt.all_gather_bytes)
        .raw(", \"all_reduce_bytes\": ")
        .integer(bt.all_reduce_bytes)
        .raw(", \"sent_bytes\": ")
        .integer(bt.sent_bytes)
        .raw(", \"padding_sent_bytes\": ")
        .integer(bt.padding_sent_bytes)
        .raw("}");
    sep = ", ";
  }
  w.raw("]}");
}

}  // namespace

void write_bytes_per_rank(json::Writer& w, const BytesPerRank& b) {
  w.raw("{\"params\": ").integer(b.params).raw(", \"grads\": ").integer(b.grads);
  w.raw(", \"optimizer\": ").integer(b.optimizer).raw("}");
}

void write_traffic_members(json::Writer& w, const LayoutTraffic& t) {
  w.raw("\"reduce_scatter_bytes\": ")
      .integer(t.reduce_scatter_bytes)
      .raw(", \"all_gather_bytes\": ")
      .integer(t.all_gather_bytes)
      .raw(", \"all_reduce_bytes\": ")
      .integer(t.all_reduce_bytes)
      .raw(", \"sent_bytes\": ")
      .integer(t.sent_bytes)
      .raw(", \"padding_sent_bytes\": ")
      .integer(t.padding_sent_bytes);
}

std::string stats_to_json(const LayoutStats& s, double link_gbps) {
  std::string text;
  json::Writer w(text);
  w.raw("{\"param_elements\": ")
      .integer(s.param_elements)
      .raw(", \"padding\": ")
      .integer(s.padding)
      .raw(", \"floor_padding\": ")
      .integer(s.floor_padding)
      .raw(", \"padding_percent\": ")
      .raw(fmt::format("{:.4f}", s.padding_percent()))
      .raw(", \"floor_percent\": ")
      .raw(fmt::format("{:.4f}", s.floor_percent()))
      .raw(", \"cost_imbalance\": ")
      .raw(fmt::format("{:.6f}", s.cost_imbalance))
      .raw(", \"cost_imbalance_bound\": ")
      .raw(fmt::format("{:.6f}", s.cost_imbalance_bound))
      .raw(", \"bytes_per_rank\": ");
  write_bytes_per_rank(w, s.bytes_per_rank);
  w.raw(", \"traffic_per_step\": ");
  write_traffic(w, s);
  if (link_gbps > 0) {
    w.raw(", \"estimate\": {\"link_gbps\": ")
        .raw(fmt::format("{}", link_gbps))
        .raw(", \"seconds\": ")
        .raw(fmt::format("{:.6g}", s.traffic.estimated_seconds(link_gbps)))
        .raw("}");
  }
  w.raw("}");
  return text;
}

}  // namespace paramlayout
