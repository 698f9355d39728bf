#include "summary.hpp"

#include <fmt/format.h>

#include <array>

namespace paramlayout::cli {
namespace {

double percent(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::string group_digits(std::int64_t value) {
  std::string digits = fmt::format("{}", value);
  const std::size_t first = digits[0] == '-' ? 1 : 0;
  for (std::size_t i = digits.size(); i > first + 3; i -= 3) digits.insert(i - 3, 1, ',');
  return digits;
}

std::string human_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t unit = 0;
  while (bytes >= 1024.0 && unit + 1 < kUnits.size()) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

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
