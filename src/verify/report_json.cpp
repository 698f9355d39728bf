#include "format/json_writer.hpp"
#include "paramlayout/verify.hpp"

namespace paramlayout {
namespace {

/// The report's members, each on a line starting with `nl` (a newline and the indent).
void write_members(json::Writer& w, const VerifyReport& report, const Layout& layout,
                   const std::string& nl) {
  const std::string sep_line = "," + nl;
  w.raw(nl)
      .raw("\"ok\": ")
      .boolean(report.ok())
      .raw(sep_line)
      .raw("\"backend\": ")
      .quoted(report.backend)
      .raw(sep_line)
      .raw("\"devices\": ")
      .integer(report.devices)
      .raw(sep_line)
      .raw("\"seconds\": ")
      .raw(fmt::format("{:.6f}", report.seconds))
      .raw(sep_line)
      .raw("\"notes\": [");
  const char* sep = "";
  for (const std::string& note : report.notes) {
    w.raw(sep).quoted(note);
    sep = ", ";
  }
  w.raw("]").raw(sep_line).raw("\"violations\": [");
  const std::string first_item = nl + "  ";
  const std::string next_item = sep_line + "  ";
  std::string_view sep_item = first_item;
  for (const Violation& v : report.violations) {
    w.raw(sep_item).raw("{\"where\": ").quoted(v.where).raw(", \"what\": ").quoted(v.what).raw("}");
    sep_item = next_item;
  }
  w.raw(report.violations.empty() ? "]" : nl + "]");
  w.raw(sep_line).raw("\"mismatches\": ").integer(report.mismatches);
  w.raw(sep_line).raw("\"first_mismatches\": [");
  sep_item = first_item;
  for (const ElementMismatch& m : report.first_mismatches) {
    w.raw(sep_item)
        .raw("{\"buffer\": ")
        .integer(static_cast<std::int64_t>(m.buffer))
        .raw(", \"bucket\": ")
        .integer(m.bucket)
        .raw(", \"round\": ")
        .quoted(m.round)
        .raw(", \"rank\": ")
        .integer(m.rank)
        .raw(", \"param\": ")
        .quoted(m.param)
        .raw(", \"element\": ")
        .integer(m.element)
        .raw(", \"offset\": ")
        .integer(m.offset)
        .raw(", \"expected\": ")
        .quoted(m.expected)
        .raw(", \"received\": ")
        .quoted(m.received)
        .raw("}");
    sep_item = next_item;
  }
  w.raw(report.first_mismatches.empty() ? "]" : nl + "]");
  w.raw(sep_line).raw("\"buckets\": [");
  sep_item = first_item;
  for (const BucketReport& b : report.buckets) {
    w.raw(sep_item)
        .raw("{\"buffer\": ")
        .integer(static_cast<std::int64_t>(b.buffer))
        .raw(", \"key\": ")
        .quoted(describe(layout.buffers[b.buffer].key))
        .raw(", \"bucket\": ")
        .integer(b.bucket)
        .raw(", \"ranks\": ")
        .integer(b.ranks)
        .raw(", \"devices\": ")
        .integer(b.devices)
        .raw(", \"elements\": ")
        .integer(b.elements)
        .raw(", \"chunks\": ")
        .integer(b.chunks)
        .raw(", \"grad_mismatches\": ")
        .integer(b.grad_mismatches)
        .raw(", \"param_mismatches\": ")
        .integer(b.param_mismatches)
        .raw(", \"reduce_scatter_seconds\": ")
        .raw(fmt::format("{:.6f}", b.reduce_scatter_seconds))
        .raw(", \"all_gather_seconds\": ")
        .raw(fmt::format("{:.6f}", b.all_gather_seconds))
        .raw(", \"reduce_scatter_bytes\": ")
        .raw(fmt::format("{:.0f}", b.reduce_scatter_bytes))
        .raw(", \"all_gather_bytes\": ")
        .raw(fmt::format("{:.0f}", b.all_gather_bytes))
        .raw(", \"algbw_gbps\": ")
        .raw(fmt::format("{:.3f}", b.algbw() / 1e9))
        .raw(", \"busbw_gbps\": ")
        .raw(fmt::format("{:.3f}", b.busbw() / 1e9))
        .raw(", \"fill_seconds\": ")
        .raw(fmt::format("{:.6f}", b.fill_seconds))
        .raw(", \"check_seconds\": ")
        .raw(fmt::format("{:.6f}", b.check_seconds))
        .raw(", \"filled_bytes\": ")
        .raw(fmt::format("{:.0f}", b.filled_bytes))
        .raw(", \"checked_bytes\": ")
        .raw(fmt::format("{:.0f}", b.checked_bytes))
        .raw(", \"incomplete_params\": [");
    const char* psep = "";
    for (const std::string& p : b.incomplete_params) {
      w.raw(psep).quoted(p);
      psep = ", ";
    }
    w.raw("]}");
    sep_item = next_item;
  }
  w.raw(report.buckets.empty() ? "]" : nl + "]");
}

}  // namespace

std::string verify_report_json(const VerifyReport& report, const Layout& layout) {
  std::string text;
  json::Writer w(text);
  w.raw("{");
  write_members(w, report, layout, "\n  ");
  w.raw("\n}\n");
  return text;
}

std::string verify_job_report_json(std::string_view job,
                                   const std::vector<ChunkVerifyReport>& chunks) {
  std::int64_t elements = 0;
  std::int64_t mismatches = 0;
  double seconds = 0;
  std::vector<std::string_view> failed;
  for (const ChunkVerifyReport& c : chunks) {
    for (const BucketReport& b : c.report.buckets) elements += b.elements;
    mismatches += c.report.mismatches;
    seconds += c.report.seconds;
    if (!c.report.ok()) failed.push_back(c.name);
  }
  std::string text;
  json::Writer w(text);
  w.raw("{\n  \"job\": ")
      .quoted(job)
      .raw(",\n  \"ok\": ")
      .boolean(failed.empty())
      .raw(",\n  \"chunks_verified\": ")
      .integer(static_cast<std::int64_t>(chunks.size()))
      .raw(",\n  \"failed\": [");
  const char* sep = "";
  for (std::string_view name : failed) {
    w.raw(sep).quoted(name);
    sep = ", ";
  }
  w.raw("],\n  \"elements\": ")
      .integer(elements)
      .raw(",\n  \"mismatches\": ")
      .integer(mismatches)
      .raw(",\n  \"seconds\": ")
      .raw(fmt::format("{:.6f}", seconds))
      .raw(",\n  \"chunks\": [");
  sep = "\n    {";
  for (const ChunkVerifyReport& c : chunks) {
    w.raw(sep)
        .raw("\n      \"stage\": ")
        .integer(c.stage)
        .raw(",\n      \"chunk\": ")
        .integer(c.chunk)
        .raw(",\n      \"name\": ")
        .quoted(c.name)
        .raw(",\n      \"dp\": ")
        .integer(c.layout->options.dp)
        .raw(",\n      \"expert_dp\": ")
        .integer(c.layout->options.expert_dp)
        .raw(",");
    write_members(w, c.report, *c.layout, "\n      ");
    w.raw("\n    }");
    sep = ",\n    {";
  }
  w.raw(chunks.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return text;
}

}  // namespace paramlayout
