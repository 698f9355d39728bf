#include "summary.hpp"

#include <fmt/format.h>


namespace paramlayout::cli {
namespace {

double percent(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

std::string bytes_text(std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

/// One table row's figures. The elements come from LayoutStats, whose totals are known to
/// fit in 64 bits.
struct Row {
  std::size_t params = 0;
  std::size_t buckets = 0;
  std::int64_t numel = 0;
  std::int64_t padding = 0;
  double param_bytes = 0;
  double grad_bytes = 0;
};

Row buffer_row(const BufferLayout& b, const BufferStats& s) {
  return {b.params.size(), b.buckets.size(), b.numel, s.padding,
          static_cast<double>(b.numel) * dtype_bytes(b.key.param_dtype),
          static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype)};
}

Row layout_row(const Layout& layout, const LayoutStats& s) {
  Row row;
  for (const BufferLayout& b : layout.buffers) {
    row.params += b.params.size();
    row.buckets += b.buckets.size();
  }
  row.numel = s.param_elements + s.padding;
  row.padding = s.padding;
  row.param_bytes = static_cast<double>(s.param_bytes);
  row.grad_bytes = static_cast<double>(s.grad_bytes);
  return row;
}

}  // namespace

void print_stats(std::FILE* out, const LayoutStats& s) {
  fmt::print(out, "  padding {:.2f}% of param elements (floor {:.2f}%)", s.padding_percent(),
             s.floor_percent());
  if (s.has_layerwise) {
    fmt::print(out, "; Newton-Schulz cost per rank: max/mean {:.3f} (bound {:.3f})",
               s.cost_imbalance, s.cost_imbalance_bound);
  }
  fmt::print(out, "\n  per rank: params {}, grads {}, optimizer state {}, total {}\n",
             bytes_text(s.param_bytes), bytes_text(s.grad_bytes), bytes_text(s.optimizer_bytes),
             bytes_text(s.param_bytes + s.grad_bytes + s.optimizer_bytes));
}

void print_pipeline_summary(std::FILE* out, const std::vector<ChunkSummary>& chunks) {
  constexpr const char* kRow = "  {:<40} {:>7} {:>17} {:>8} {:>12} {:>12}\n";
  fmt::print(out, "pipeline: {} chunks\n", chunks.size());
  fmt::print(out, kRow, "chunk", "params", "numel", "padding", "params/rank", "grads/rank");
  std::size_t largest = 0;
  double largest_bytes = -1;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Row t = layout_row(*chunks[i].layout, *chunks[i].stats);
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
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    const BufferLayout& b = layout.buffers[i];
    const Row t = buffer_row(b, stats.buffers[i]);
    fmt::print(out, kRow, describe(b.key), t.params, t.buckets, group_digits(t.numel),
               fmt::format("{:.2f}%", percent(t.padding, t.numel)), human_bytes(t.param_bytes),
               human_bytes(t.grad_bytes));
  }
  if (layout.buffers.size() > 1) {
    const Row total = layout_row(layout, stats);
    fmt::print(out, kRow, "total", total.params, total.buckets, group_digits(total.numel),
               fmt::format("{:.2f}%", percent(total.padding, total.numel)),
               human_bytes(total.param_bytes), human_bytes(total.grad_bytes));
  }
  print_stats(out, stats);
}

}  // namespace paramlayout::cli
