// diff OLD_JOB NEW_JOB's table of chunks: per (stage, chunk) what it builds, its params,
// padding, buckets and bytes per rank before and after, and what moved; runs of chunks that
// changed alike (or not at all) folded into one row.
#include <fmt/format.h>

#include <algorithm>

#include "diff_job.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

std::string signed_digits(std::int64_t delta) {
  if (delta == 0) return "0";
  return (delta > 0 ? "+" : "-") + group_digits(delta > 0 ? delta : -delta);
}

double total(const BytesPerRank& b) {
  return static_cast<double>(b.params) + static_cast<double>(b.grads) +
         static_cast<double>(b.optimizer);
}

std::string signed_bytes(double delta) {
  return (delta >= 0 ? "+" : "-") + human_bytes(delta >= 0 ? delta : -delta);
}

/// "E 0-2", "33-34", "59-60 mtp 0 L": what a chunk builds (E: the embedding of the first
/// stage; an MTP chunk's embedding copy goes with its MTP layers).
std::string builds(const JobRecordChunk& c) {
  std::vector<std::string> parts;
  if (c.embedding && (c.mtp_layers.empty() || (c.stage == 0 && c.chunk == 0))) {
    parts.emplace_back("E");
  }
  if (c.layers.size() == 1) parts.push_back(fmt::format("{}", c.layers.front()));
  if (c.layers.size() > 1) parts.push_back(fmt::format("{}-{}", c.layers.front(), c.layers.back()));
  if (c.mtp_layers.size() == 1) parts.push_back(fmt::format("mtp {}", c.mtp_layers.front()));
  if (c.mtp_layers.size() > 1) {
    parts.push_back(fmt::format("mtp {}-{}", c.mtp_layers.front(), c.mtp_layers.back()));
  }
  if (c.output) parts.emplace_back("L");
  return parts.empty() ? std::string("-") : fmt::format("{}", fmt::join(parts, " "));
}

/// One chunk's line of the table, or a run of chunks that changed alike.
struct ChunkRow {
  std::string name;
  std::string builds;
  std::string params;
  std::string padding;
  std::string buckets;
  std::string per_rank;
  std::string details;  ///< what moved, as words; "" for nothing more
  bool identical = false;
  std::size_t count = 1;
  std::string last;  ///< the last chunk's name, for a run

  bool same_change(const ChunkRow& o) const {
    return identical == o.identical && params == o.params && padding == o.padding &&
           buckets == o.buckets && per_rank == o.per_rank && details == o.details;
  }
};

/// The layout options that differ for this chunk alone (dp, strategy, packer and the grads'
/// dtype are the job's, said once above).
std::vector<std::string> chunk_options(const LayoutDiff& d) {
  std::vector<std::string> out;
  for (const OptionChange& o : d.options) {
    if (o.name == "dp" || o.name == "expert_dp" || o.name == "strategy" || o.name == "packer" ||
        o.name == "grad_reduce_in_fp32") {
      continue;
    }
    out.push_back(
        fmt::format("{} {} -> {}", o.name, diff_value_text(o.before), diff_value_text(o.after)));
  }
  return out;
}

std::string chunk_details(const JobChunkDiff& c) {
  std::vector<std::string> parts;
  const auto part = [&](std::size_t n, std::string_view what) {
    if (n > 0) parts.push_back(fmt::format("{} {}", n, what));
  };
  part(c.params_added, "added");
  part(c.params_removed, "removed");
  part(c.params_resized, "resized");
  part(c.params_moved_in, "moved in");
  part(c.params_moved_out, "moved out");
  const LayoutDiff& d = *c.layout;
  part(d.count(&ParamChange::moved), "at another offset");
  if (const std::size_t owners = d.count(&ParamChange::owner_changed); owners > 0) {
    parts.push_back(fmt::format("{} change{} owner ({} elements of optimizer state)", owners,
                                owners == 1 ? "s" : "", group_digits(d.owner_changed_elements)));
  }
  if (!parts.empty()) {  // "3 params added, 1 resized": the first count names what it counts
    const std::size_t space = parts.front().find(' ');
    const bool one = parts.front().substr(0, space) == "1";
    parts.front().insert(space, one ? " param" : " params");
  }
  if (c.buckets_moved > 0) {
    parts.push_back(
        fmt::format("{} of {} buckets at other bounds", c.buckets_moved, c.buckets_after));
  }
  const bool buffers_differ = std::any_of(d.buffers.begin(), d.buffers.end(), [](const auto& b) {
    return b.contract_differs || !b.before || !b.after;
  });
  if (parts.empty() && buffers_differ) parts.emplace_back("buffers differ in padding or shards");
  for (std::string& o : chunk_options(d)) parts.push_back(std::move(o));
  return fmt::format("{}", fmt::join(parts, ", "));
}

ChunkRow chunk_row(const JobChunkDiff& c) {
  ChunkRow row;
  row.name = c.name();
  row.identical = c.identical;
  if (c.before == nullptr || c.after == nullptr) {
    const JobRecordChunk& only = c.before ? *c.before : *c.after;
    row.builds = builds(only);
    row.params = group_digits(only.param_elements);
    row.padding = row.buckets = "-";
    row.per_rank = human_bytes(total(only.bytes_per_rank));
    row.details = c.before ? "only in the old job" : "only in the new job";
    return row;
  }
  row.builds = change(builds(*c.before), builds(*c.after));
  if (c.identical) return row;
  const std::int64_t was = c.before->param_elements;
  const std::int64_t now = c.after->param_elements;
  row.params = was == now ? group_digits(now)
                          : fmt::format("{} ({})", group_digits(now), signed_digits(now - was));
  std::int64_t padding[2] = {0, 0};
  std::int64_t buckets[2] = {0, 0};
  for (const BufferChange& b : c.layout->buffers) {
    if (b.before) padding[0] += b.before->padding, buckets[0] += b.before->buckets;
    if (b.after) padding[1] += b.after->padding, buckets[1] += b.after->buckets;
  }
  row.padding = change(group_digits(padding[0]), group_digits(padding[1]));
  row.buckets = change(group_digits(buckets[0]), group_digits(buckets[1]));
  row.per_rank = bytes_change(c.before->bytes_per_rank, c.after->bytes_per_rank);
  row.details = chunk_details(c);
  return row;
}

/// Runs of consecutive chunks that changed alike (or are identical) as one row each.
std::vector<ChunkRow> folded(const std::vector<JobChunkDiff>& chunks) {
  std::vector<ChunkRow> rows;
  for (const JobChunkDiff& c : chunks) {
    ChunkRow row = chunk_row(c);
    const bool one_side = c.before == nullptr || c.after == nullptr;
    if (!rows.empty() && !one_side && rows.back().same_change(row) &&
        rows.back().details.find("only in") == std::string::npos) {
      rows.back().last = row.name;
      ++rows.back().count;
      continue;
    }
    rows.push_back(std::move(row));
  }
  for (ChunkRow& r : rows) {
    if (r.count == 1 || r.identical) continue;
    r.builds = ".. " + r.last;
    r.details =
        fmt::format("{} chunks alike{}{}", r.count, r.details.empty() ? "" : ": ", r.details);
  }
  return rows;
}

/// `text` indented by `indent`, its lines broken after ", " to fit kWidth columns.
void print_wrapped(const std::string& text, std::size_t indent) {
  constexpr std::size_t kWidth = 110;
  std::string line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(", ", start);
    end = end == std::string::npos ? text.size() : end + 2;
    const std::string piece = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + piece.size() > kWidth) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      fmt::print("{:<{}}{}\n", "", indent, line);
      line.clear();
    }
    line += piece;
    start = end;
  }
  if (!line.empty()) fmt::print("{:<{}}{}\n", "", indent, line);
}

}  // namespace

std::string bytes_change(const BytesPerRank& before, const BytesPerRank& after) {
  const double was = total(before);
  const double now = total(after);
  if (was == now) return human_bytes(now);
  return fmt::format("{} -> {} ({})", human_bytes(was), human_bytes(now), signed_bytes(now - was));
}

void print_job_chunks(const JobDiff& d, std::size_t limit) {
  if (d.chunks_differing() == 0) {
    fmt::print("\nchunks: all {} identical\n", d.chunks.size());
    return;
  }
  const std::vector<ChunkRow> rows = folded(d.chunks);
  std::size_t name_width = 5;
  std::size_t widths[5] = {6, 14, 7, 7, 8};
  for (const ChunkRow& r : rows) {
    if (r.identical) continue;
    name_width = std::max(name_width, r.name.size());
    const std::string* cells[5] = {&r.builds, &r.params, &r.padding, &r.buckets, &r.per_rank};
    for (std::size_t i = 0; i < 5; ++i) widths[i] = std::max(widths[i], cells[i]->size());
  }
  fmt::print("\nchunks (old -> new):\n");
  fmt::print("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", "chunk", name_width, "builds",
             widths[0], "param elements", widths[1], "padding", widths[2], "buckets", widths[3],
             "per rank");
  std::size_t shown = 0;
  for (const ChunkRow& r : rows) {
    if (limit != 0 && shown == limit) {
      fmt::print("  ... and {} more rows (--limit 0 shows all)\n", rows.size() - shown);
      break;
    }
    ++shown;
    if (r.identical) {
      if (r.count == 1) fmt::print("  {}: identical\n", r.name);
      if (r.count > 1) fmt::print("  {} .. {}: identical ({} chunks)\n", r.name, r.last, r.count);
      continue;
    }
    fmt::print("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", r.name, name_width, r.builds,
               widths[0], r.params, widths[1], r.padding, widths[2], r.buckets, widths[3],
               r.per_rank);
    print_wrapped(r.details, name_width + 4);
  }
}

}  // namespace paramlayout::cli
