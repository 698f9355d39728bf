#include "summary.hpp"

#include <fmt/format.h>


namespace paramlayout::cli {
namespace {

double percent(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout) {
  const PlanOptions& o = layout.options;
  std::string bucket = o.bucket_size ? group_digits(*o.bucket_size) : std::string("none");
  fmt::print(out, "{}: {} params -> {}, dp {}", layout.model.value_or(manifest.source),
             manifest.params.size(), to_string(o.strategy), o.dp);
  if (o.expert_dp != o.dp) fmt::print(out, ", expert dp {}", o.expert_dp);
  fmt::print(out, ", bucket size {}\n", bucket);

  constexpr const char* kRow = "  {:<32} {:>7} {:>8} {:>17} {:>8} {:>12} {:>12}\n";
  fmt::print(out, kRow, "buffer", "params", "buckets", "numel", "padding", "params/rank",
             "grads/rank");
  std::size_t params = 0;
  std::size_t buckets = 0;
  std::int64_t numel = 0;
  std::int64_t padding = 0;
  double param_bytes = 0;
  double grad_bytes = 0;
  for (const BufferLayout& b : layout.buffers) {
    const std::int64_t pad = b.numel - b.param_numel();
    const double pb = static_cast<double>(b.numel) * dtype_bytes(b.key.param_dtype);
    const double gb = static_cast<double>(b.numel) * dtype_bytes(b.key.grad_dtype);
    fmt::print(out, kRow, describe(b.key), b.params.size(), b.buckets.size(),
               group_digits(b.numel), fmt::format("{:.2f}%", percent(pad, b.numel)),
               human_bytes(pb), human_bytes(gb));
    params += b.params.size();
    buckets += b.buckets.size();
    numel += b.numel;
    padding += pad;
    param_bytes += pb;
    grad_bytes += gb;
  }
  if (layout.buffers.size() > 1) {
    fmt::print(out, kRow, "total", params, buckets, group_digits(numel),
               fmt::format("{:.2f}%", percent(padding, numel)), human_bytes(param_bytes),
               human_bytes(grad_bytes));
  }
}

}  // namespace paramlayout::cli
