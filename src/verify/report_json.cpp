#include "format/json_writer.hpp"
#include "paramlayout/verify.hpp"

namespace paramlayout {

std::string verify_report_json(const VerifyReport& report, const Layout& layout) {
  std::string text;
  json::Writer w(text);
  w.raw("{\n  \"ok\": ").boolean(report.ok())
      .raw(",\n  \"backend\": ").quoted(report.backend)
      .raw(",\n  \"devices\": ").integer(report.devices)
      .raw(",\n  \"seconds\": ").raw(fmt::format("{:.6f}", report.seconds))
      .raw(",\n  \"notes\": [");
  const char* sep = "";
  for (const std::string& note : report.notes) {
    w.raw(sep).quoted(note);
    sep = ", ";
  }
  w.raw("],\n  \"violations\": [");
  sep = "\n    ";
  for (const Violation& v : report.violations) {
    w.raw(sep).raw("{\"where\": ").quoted(v.where).raw(", \"what\": ").quoted(v.what).raw("}");
    sep = ",\n    ";
  }
  w.raw(report.violations.empty() ? "]" : "\n  ]");
  w.raw(",\n  \"mismatches\": ").integer(report.mismatches).raw(",\n  \"first_mismatches\": [");
  sep = "\n    ";
  for (const ElementMismatch& m : report.first_mismatches) {
    w.raw(sep).raw("{\"buffer\": ").integer(static_cast<std::int64_t>(m.buffer))
        .raw(", \"bucket\": ").integer(m.bucket).raw(", \"round\": ").quoted(m.round)
        .raw(", \"rank\": ").integer(m.rank).raw(", \"param\": ").quoted(m.param)
        .raw(", \"element\": ").integer(m.element).raw(", \"offset\": ").integer(m.offset)
        .raw(", \"expected\": ").quoted(m.expected).raw(", \"received\": ").quoted(m.received)
        .raw("}");
    sep = ",\n    ";
  }
  w.raw(report.first_mismatches.empty() ? "]" : "\n  ]");
  w.raw(",\n  \"buckets\": [");
  sep = "\n    ";
  for (const BucketReport& b : report.buckets) {
    w.raw(sep).raw("{\"buffer\": ").integer(static_cast<std::int64_t>(b.buffer))
        .raw(", \"key\": ").quoted(describe(layout.buffers[b.buffer].key))
        .raw(", \"bucket\": ").integer(b.bucket).raw(", \"ranks\": ").integer(b.ranks)
        .raw(", \"devices\": ").integer(b.devices)
        .raw(", \"elements\": ").integer(b.elements).raw(", \"chunks\": ").integer(b.chunks)
        .raw(", \"grad_mismatches\": ").integer(b.grad_mismatches)
        .raw(", \"param_mismatches\": ").integer(b.param_mismatches)
        .raw(", \"reduce_scatter_seconds\": ").raw(fmt::format("{:.6f}", b.reduce_scatter_seconds))
        .raw(", \"all_gather_seconds\": ").raw(fmt::format("{:.6f}", b.all_gather_seconds))
        .raw(", \"reduce_scatter_bytes\": ").raw(fmt::format("{:.0f}", b.reduce_scatter_bytes))
        .raw(", \"all_gather_bytes\": ").raw(fmt::format("{:.0f}", b.all_gather_bytes))
        .raw(", \"algbw_gbps\": ").raw(fmt::format("{:.3f}", b.algbw() / 1e9))
        .raw(", \"busbw_gbps\": ").raw(fmt::format("{:.3f}", b.busbw() / 1e9))
        .raw(", \"fill_seconds\": ").raw(fmt::format("{:.6f}", b.fill_seconds))
        .raw(", \"check_seconds\": ").raw(fmt::format("{:.6f}", b.check_seconds))
        .raw(", \"filled_bytes\": ").raw(fmt::format("{:.0f}", b.filled_bytes))
        .raw(", \"checked_bytes\": ").raw(fmt::format("{:.0f}", b.checked_bytes))
        .raw(", \"incomplete_params\": [");
    const char* psep = "";
    for (const std::string& p : b.incomplete_params) {
      w.raw(psep).quoted(p);
      psep = ", ";
    }
    w.raw("]}");
    sep = ",\n    ";
  }
  w.raw(report.buckets.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return text;
}

}  // namespace paramlayout
