#include "summary.hpp"

#include <fmt/format.h>


namespace paramlayout::cli {
namespace {

double percent(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

/// Totals over a layout's buffers.
struct LayoutTotals {
  std::size_t params = 0;
  std::size_t buckets = 0;
  std::int64_t numel = 0;
  std::int64_t padding = 0;
  double param_bytes = 0;
  double grad_bytes = 0;

  void add(const BufferLayout& b) {
    params += b.params.size();
    buckets += b.buckets.size();
    numel += b.numel;
    padding += b.numel - b.param_numel();
    param_bytes += static_cast<double>(b.numel) * dtype_bytes(b.key.param_dtype);
    grad_bytes += static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype);
  }
};

}  // namespace

void print_stats(std::FILE* out, const LayoutStats& s) {
  fmt::print(out, "  padding {:.2f}% of param elements (floor {:.2f}%)", s.padding_percent(),
             s.floor_percent());
  if (s.has_layerwise) {
    fmt::print(out, "; Newton-Schulz cost per rank: max/mean {:.3f} (bound {:.3f})",
               s.cost_imbalance, s.cost_imbalance_bound);
  }
  fmt::print(out, "\n  per rank: params {}, grads {}, optimizer state {}, total {}\n",
             human_bytes(s.param_bytes), human_bytes(s.grad_bytes),
             human_bytes(s.optimizer_bytes),
             human_bytes(s.param_bytes + s.grad_bytes + s.optimizer_bytes));
}

std::string stats_json(const LayoutStats& s) {
  return fmt::format(
      "{{\"param_elements\": {}, \"padding\": {}, \"padding_percent\": {:.4f}, "
      "\"floor_padding\": {}, \"floor_percent\": {:.4f}, \"cost_imbalance\": {:.6f}, "
      "\"cost_imbalance_bound\": {:.6f}, \"bytes_per_rank\": {{\"params\": {:.0f}, "
      "\"grads\": {:.0f}, \"optimizer\": {:.0f}}}}}\n",
      s.param_elements, s.padding, s.padding_percent(), s.floor_padding, s.floor_percent(),
      s.cost_imbalance, s.cost_imbalance_bound, s.param_bytes, s.grad_bytes, s.optimizer_bytes);
}

void print_pipeline_summary(std::FILE* out, const std::vector<ChunkSummary>& chunks) {
  constexpr const char* kRow = "  {:<40} {:>7} {:>17} {:>8} {:>12} {:>12}\n";
  fmt::print(out, "pipeline: {} chunks\n", chunks.size());
  fmt::print(out, kRow, "chunk", "params", "numel", "padding", "params/rank", "grads/rank");
  std::size_t largest = 0;
  double largest_bytes = -1;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    LayoutTotals t;
    for (const BufferLayout& b : chunks[i].layout->buffers) t.add(b);
    fmt::print(out, kRow, chunks[i].name, t.params, group_digits(t.numel),
               fmt::format("{:.2f}%", percent(t.padding, t.numel)), human_bytes(t.param_bytes),
               human_bytes(t.grad_bytes));
    if (t.param_bytes + t.grad_bytes > largest_bytes) {
      largest_bytes = t.param_bytes + t.grad_bytes;
      largest = i;
    }
  }
  fmt::print(out, "  largest: {} ({} of params and grads per rank)\n", chunks[largest].name,
             human_bytes(largest_bytes));
}

void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout,
                        const LayoutStats& stats) {
  const PlanOptions& o = layout.options;
  std::string bucket = o.bucket_size ? group_digits(*o.bucket_size) : std::string("none");
  fmt::print(out, "{}: {} params -> {}, dp {}", layout.model.value_or(manifest.source),
             manifest.params.size(), to_string(o.strategy), o.dp);
  if (o.expert_dp != o.dp) fmt::print(out, ", expert dp {}", o.expert_dp);
  fmt::print(out, ", bucket size {}\n", bucket);

  constexpr const char* kRow = "  {:<32} {:>7} {:>8} {:>17} {:>8} {:>12} {:>12}\n";
  fmt::print(out, kRow, "buffer", "params", "buckets", "numel", "padding", "params/rank",
             "grads/rank");
  LayoutTotals total;
  for (const BufferLayout& b : layout.buffers) {
    LayoutTotals t;
    t.add(b);
    total.add(b);
    fmt::print(out, kRow, describe(b.key), t.params, t.buckets, group_digits(t.numel),
               fmt::format("{:.2f}%", percent(t.padding, t.numel)), human_bytes(t.param_bytes),
               human_bytes(t.grad_bytes));
  }
  if (layout.buffers.size() > 1) {
    fmt::print(out, kRow, "total", total.params, total.buckets, group_digits(total.numel),
               fmt::format("{:.2f}%", percent(total.padding, total.numel)),
               human_bytes(total.param_bytes), human_bytes(total.grad_bytes));
  }
  print_stats(out, stats);
}

}  // namespace paramlayout::cli
