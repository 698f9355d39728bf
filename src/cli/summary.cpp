#include "summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "io.hpp"
#include "paramlayout/alternatives.hpp"

namespace paramlayout::cli {
namespace {

std::string bytes_text(std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

/// 525336576 -> "525.3M": a count at a glance (exact figures are in --json).
std::string short_count(std::int64_t n) {
  constexpr std::array<const char*, 5> kUnits = {"k", "M", "G", "T", "P"};
  if (n < 10000) return std::to_string(n);
  double value = static_cast<double>(n);
  std::size_t unit = 0;
  for (value /= 1000; value >= 1000 && unit + 1 < kUnits.size(); value /= 1000) ++unit;
  return fmt::format("{:.{}f}{}", value, value < 100 ? 2 : 1, kUnits[unit]);
}

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
  return {b.params.size(),
          b.buckets.size(),
          b.numel,
          s.padding,
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
  row.param_bytes = static_cast<double>(s.bytes_per_rank.params);
  row.grad_bytes = static_cast<double>(s.bytes_per_rank.grads);
  return row;
}

}  // namespace

void print_stats(std::FILE* out, const LayoutStats& s, double link_gbps) {
  fmt::print(out, "  padding {:.2f}% of the buffers (floor {:.2f}%)", s.padding_percent(),
             s.floor_percent());
  if (s.has_layerwise) {
    fmt::print(out, "; Newton-Schulz cost per rank: max/mean {:.3f} (bound {:.3f})",
               s.cost_imbalance, s.cost_imbalance_bound);
  }
  const BytesPerRank& bytes = s.bytes_per_rank;
  fmt::print(out, "\n  per rank: params {}, grads {}, optimizer state {}, total {}\n",
             bytes_text(bytes.params), bytes_text(bytes.grads), bytes_text(bytes.optimizer),
             bytes_text(bytes.total()));
  const LayoutTraffic& t = s.traffic;
  std::vector<std::string> moved;
  if (t.reduce_scatter_bytes > 0) {
    moved.push_back("reduce-scatters " + bytes_text(t.reduce_scatter_bytes));
  }
  if (t.all_gather_bytes > 0) moved.push_back("all-gathers " + bytes_text(t.all_gather_bytes));
  if (t.all_reduce_bytes > 0) moved.push_back("all-reduces " + bytes_text(t.all_reduce_bytes));
  moved.push_back(
      fmt::format("sends {} ({:.2f}% padding)", bytes_text(t.sent_bytes), t.padding_percent()));
  fmt::print(out, "  per step, each rank: {}\n", fmt::join(moved, ", "));
  if (link_gbps > 0) {
    fmt::print(out,
               "  estimate: {:.3g} s of collectives per step at {:g} Gb/s per rank (ring model, "
               "bandwidth only)\n",
               t.estimated_seconds(link_gbps), link_gbps);
  }
}

void print_traffic_table(std::FILE* out, const Layout& layout, const LayoutStats& stats) {
  const bool unpadded = layout.options.strategy == Strategy::unpadded;
  constexpr const char* kRow = "  {:<34} {:>6} {:>8} {:>15} {:>14} {:>11} {:>11} {:>8}\n";
  fmt::print(out, "\n");
  fmt::print(out, kRow, "per step and rank", "ranks", "buckets", "bucket elements",
             unpadded ? "all-reduce" : "reduce-scatter", unpadded ? "" : "all-gather", "sent",
             "padding");
  for (const BufferStats& b : stats.buffers) {
    const BufferTraffic& t = b.traffic;
    const std::string sizes =
        t.smallest_bucket == t.largest_bucket
            ? short_count(t.largest_bucket)
            : short_count(t.smallest_bucket) + "-" + short_count(t.largest_bucket);
    const std::int64_t grads = unpadded ? t.all_reduce_bytes : t.reduce_scatter_bytes;
    fmt::print(out, kRow, describe(b.key), t.ranks, t.buckets, sizes, bytes_text(grads),
               unpadded ? std::string() : bytes_text(t.all_gather_bytes), bytes_text(t.sent_bytes),
               fmt::format("{:.2f}%", t.sent_bytes == 0
                                          ? 0.0
                                          : 100.0 * static_cast<double>(t.padding_sent_bytes) /
                                                static_cast<double>(t.sent_bytes)));
  }
}

void warn_if_far_off(const std::string& name, const Manifest& manifest, const Layout& layout,
                     const LayoutStats& stats) {
  const std::optional<PaddingAdvice> advice = padding_advice(manifest, layout, stats);
  if (!advice) return;
  const auto figures = [](const LayoutFootprint& f) {
    return fmt::format("{:.2f}% padding, {} per rank", f.padding_percent(),
                       bytes_text(f.bytes_per_rank.total()));
  };
  print_warning(fmt::format(
      "{}: layerwise at dp {} pads {:.2f}% of its buffers and needs {} per rank, far more "
      "than other plans of it",
      name, layout.options.dp, stats.padding_percent(), bytes_text(stats.bytes_per_rank.total())));
  if (advice->largest_param) {
    fmt::print(stderr,
               "  why: a rank's shard of a bucket holds whole matrices, and \"{}\" has {} "
               "elements: over {} ranks, a bucket holding it has at least {} elements (the "
               "floor: {:.2f}% padding)\n",
               excerpt(*advice->largest_param), group_digits(advice->largest_param_elements),
               advice->shards,
               group_digits(checked_mul(advice->largest_param_elements, advice->shards)
                                .value_or(std::numeric_limits<std::int64_t>::max())),
               stats.floor_percent());
    fmt::print(stderr,
               "  what would help: that buffer over at most {} ranks (its params can fill every "
               "shard)",
               advice->shards_without_forced_padding);
  } else {
    fmt::print(stderr, "  what would help:");
  }
  if (advice->better_layerwise) {
    fmt::print(stderr, "{} {}: {}", advice->largest_param ? ";" : "",
               advice->better_layerwise->options, figures(advice->better_layerwise->footprint));
  }
  fmt::print(stderr, "\n");
  if (advice->sequential_dp) {
    fmt::print(stderr,
               "  for scale, without the layerwise optimizer: --strategy sequential-dp: {}\n",
               figures(advice->sequential_dp->footprint));
  }
}

void print_pipeline_summary(std::FILE* out, const std::vector<ChunkSummary>& chunks) {
  constexpr const char* kRow = "  {:<40} {:>7} {:>17} {:>8} {:>12} {:>12}\n";
  fmt::print(out, "pipeline: {} chunks\n", chunks.size());
  fmt::print(out, kRow, "chunk", "params", "numel", "padding", "params/rank", "grads/rank");
  std::size_t heaviest = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const Row t = layout_row(*chunks[i].layout, *chunks[i].stats);
    fmt::print(out, kRow, chunks[i].name, t.params, group_digits(t.numel),
               fmt::format("{:.2f}%", padding_share_percent(t.padding, t.numel - t.padding)),
               human_bytes(t.param_bytes), human_bytes(t.grad_bytes));
    if (chunks[i].stats->bytes_per_rank.total() > chunks[heaviest].stats->bytes_per_rank.total()) {
      heaviest = i;
    }
  }
  const BytesPerRank& bytes = chunks[heaviest].stats->bytes_per_rank;
  fmt::print(out, "  heaviest: {}, {} per rank (params {}, grads {}, optimizer state {})\n",
             chunks[heaviest].name, bytes_text(bytes.total()), bytes_text(bytes.params),
             bytes_text(bytes.grads), bytes_text(bytes.optimizer));
}

void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout,
                        const LayoutStats& stats, double link_gbps) {
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
               fmt::format("{:.2f}%", stats.buffers[i].padding_percent()),
               human_bytes(t.param_bytes), human_bytes(t.grad_bytes));
  }
  if (layout.buffers.size() > 1) {
    const Row total = layout_row(layout, stats);
    fmt::print(out, kRow, "total", total.params, total.buckets, group_digits(total.numel),
               fmt::format("{:.2f}%", stats.padding_percent()), human_bytes(total.param_bytes),
               human_bytes(total.grad_bytes));
  }
  print_stats(out, stats, link_gbps);
}

}  // namespace paramlayout::cli
