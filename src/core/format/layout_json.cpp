#include "paramlayout/layout_json.hpp"

#include <limits>

#include <fmt/format.h>

#include "json_reader.hpp"
#include "json_writer.hpp"

namespace paramlayout {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

/// `param_buffer`, only where it is not the default (a param buffer of the buffer's own).
void write_param_buffer(json::Writer& w, const ParamBufferLayout& p) {
  if (!p.in_grad_buffer && !p.packed) return;
  w.raw(",\n      \"param_buffer\": {\"in_grad_buffer\": ").boolean(p.in_grad_buffer);
  if (p.packed) {
    w.raw(", \"numel\": ").integer(p.numel).raw(", \"buckets\": [");
    const char* sep = "";
    for (const BucketRange& bucket : p.buckets) {
      w.raw(sep)
          .raw("{\"start\": ")
          .integer(bucket.start)
          .raw(", \"end\": ")
          .integer(bucket.end)
          .raw(", \"numel_unpadded\": ")
          .integer(bucket.numel_unpadded)
          .raw("}");
      sep = ", ";
    }
    w.raw("],\n        \"params\": [");
    sep = "";
    for (const ParamSlot& slot : p.params) {
      w.raw(sep).raw("[").integer(slot.start).raw(", ").integer(slot.end).raw("]");
      sep = ", ";
    }
    w.raw("]");
  }
  w.raw("}");
}

void write_buffer(json::Writer& w, const BufferLayout& b) {
  w.raw("    {\n      \"param_dtype\": \"")
      .raw(to_string(b.key.param_dtype))
      .raw("\", \"grad_dtype\": \"")
      .raw(to_string(b.key.grad_dtype))
      .raw("\", \"expert_parallel\": ")
      .boolean(b.key.expert_parallel)
      .raw(", \"layerwise\": ")
      .boolean(b.key.layerwise)
      .raw(",\n      \"strategy\": \"")
      .raw(to_string(b.strategy))
      .raw("\", \"num_shards\": ")
      .optional(b.num_shards)
      .raw(",\n      \"numel\": ")
      .integer(b.numel)
      .raw(", \"numel_unpadded\": ")
      .integer(b.numel_unpadded)
      .raw(",\n      \"buckets\": [");
  const char* sep = "\n        ";
  for (const BucketRange& bucket : b.buckets) {
    w.raw(sep)
        .raw("{\"start\": ")
        .integer(bucket.start)
        .raw(", \"end\": ")
        .integer(bucket.end)
        .raw(", \"numel_unpadded\": ")
        .integer(bucket.numel_unpadded)
        .raw("}");
    sep = ",\n        ";
  }
  w.raw(b.buckets.empty() ? "],\n" : "\n      ],\n").raw("      \"params\": [");
  sep = "\n        ";
  for (const ParamSlot& p : b.params) {
    w.raw(sep)
        .raw("{\"name\": ")
        .quoted(p.name)
        .raw(", \"start\": ")
        .integer(p.start)
        .raw(", \"end\": ")
        .integer(p.end)
        .raw(", \"bucket\": ")
        .integer(p.bucket)
        .raw(", \"index\": ")
        .integer(p.index)
        .raw("}");
    sep = ",\n        ";
  }
  w.raw(b.params.empty() ? "]" : "\n      ]");
  write_param_buffer(w, b.param_buffer);
  w.raw("\n    }");
}

void read_options(json::Reader& r, json::Element value, const json::Path& path,
                  PlanOptions& options) {
  bool expert_dp_seen = false;
  json::read_members(r, value, path,
                     {"strategy", "dp", "expert_dp", "bucket_size", "grad_reduce_in_fp32",
                      "pad_for_high_nccl_busbw", "packer"},
                     {"strategy", "dp", "bucket_size"},
                     [&](std::size_t slot, json::Element v, const json::Path& p) {
                       switch (slot) {
                         case 0:
                           if (auto s = parse_strategy(r.string(v, p))) {
                             options.strategy = *s;
                           } else {
                             r.expected(p, "one of \"sequential-dp\", \"layerwise\", \"unpadded\"",
                                        v);
                           }
                           break;
                         case 1:
                           options.dp = r.integer(v, p, 1, kMaxDp);
                           break;
                         case 2:
                           options.expert_dp = r.integer(v, p, 1, kMaxDp);
                           expert_dp_seen = true;
                           break;
                         case 3:
                           options.bucket_size = r.integer_or_null(v, p, 1, kMaxInt);
                           break;
                         case 4:
                           options.grad_reduce_in_fp32 = r.boolean(v, p);
                           break;
                         case 5:
                           options.pad_for_high_nccl_busbw = r.boolean(v, p);
                           break;
                         case 6:
                           if (auto packer = parse_packer(r.string(v, p))) {
                             options.packer = *packer;
                           } else {
                             r.expected(p, "one of \"megatron\", \"balanced\"", v);
                           }
                           break;
                         default:
                           break;
                       }
                     });
  if (!expert_dp_seen) options.expert_dp = options.dp;
}

void read_buckets(json::Reader& r, json::Element value, const json::Path& path,
                  std::vector<BucketRange>& buckets) {
  if (!r.is_array(value, path)) return;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(value)) {
    BucketRange& b = buckets.emplace_back();
    json::read_members(r, item, path.item(i++), {"start", "end", "numel_unpadded"},
                       {"start", "end", "numel_unpadded"},
                       [&](std::size_t slot, json::Element v, const json::Path& p) {
                         const std::int64_t x = r.integer(v, p, 0, kMaxInt);
                         (slot == 0 ? b.start : slot == 1 ? b.end : b.numel_unpadded) = x;
                       });
    if (r.failed()) return;
  }
}

void read_params(json::Reader& r, json::Element value, const json::Path& path, NameStore& names,
                 std::vector<ParamSlot>& params) {
  if (!r.is_array(value, path)) return;
  simdjson::dom::array items(value);
  params.reserve(items.size());
  std::size_t i = 0;
  for (json::Element item : items) {
    ParamSlot& slot_out = params.emplace_back();
    json::read_members(r, item, path.item(i++), {"name", "start", "end", "bucket", "index"},
                       {"name", "start", "end", "bucket", "index"},
                       [&](std::size_t slot, json::Element v, const json::Path& p) {
                         switch (slot) {
                           case 0:
                             slot_out.name = names.add(r.string(v, p, /*non_empty=*/true));
                             break;
                           case 1:
                             slot_out.start = r.integer(v, p, 0, kMaxInt);
                             break;
                           case 2:
                             slot_out.end = r.integer(v, p, 0, kMaxInt);
                             break;
                           case 3:
                             slot_out.bucket = r.integer(v, p, 0, kMaxInt);
                             break;
                           default:
                             slot_out.index = r.integer(v, p, 0, kMaxInt);
                             break;
                         }
                       });
    if (r.failed()) return;
  }
}

/// `param_buffer`: its packed params take the names, buckets and indices of `params`.
void read_param_buffer(json::Reader& r, json::Element value, const json::Path& path,
                       ParamBufferLayout& out) {
  json::Element ranges;
  bool ranges_seen = false;
  json::read_members(r, value, path, {"in_grad_buffer", "numel", "buckets", "params"},
                     {"in_grad_buffer"},
                     [&](std::size_t slot, json::Element v, const json::Path& p) {
                       switch (slot) {
                         case 0:
                           out.in_grad_buffer = r.boolean(v, p);
                           break;
                         case 1:
                           out.numel = r.integer(v, p, 0, kMaxInt);
                           out.packed = true;
                           break;
                         case 2:
                           read_buckets(r, v, p, out.buckets);
                           out.packed = true;
                           break;
                         default:
                           ranges = v;
                           ranges_seen = r.is_array(v, p);
                           out.packed = true;
                           break;
                       }
                     });
  if (r.failed() || !ranges_seen) return;
  const json::Path params = path.field("params");
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(ranges)) {
    const json::Path at = params.item(i++);
    if (!r.is_array(item, at)) return;
    simdjson::dom::array pair(item);
    if (pair.size() != 2) {
      r.expected(at, "[start, end]", item);
      return;
    }
    ParamSlot& slot = out.params.emplace_back();
    slot.start = r.integer(pair.at(0).value_unsafe(), at.item(0), 0, kMaxInt);
    slot.end = r.integer(pair.at(1).value_unsafe(), at.item(1), 0, kMaxInt);
    if (r.failed()) return;
  }
}

void read_dtype(json::Reader& r, json::Element v, const json::Path& p, bool allow_uint8,
                DType& out) {
  if (auto d = parse_dtype(r.string(v, p), allow_uint8)) {
    out = *d;
  } else {
    r.expected(p,
               allow_uint8 ? "one of \"float32\", \"bfloat16\", \"float16\", \"uint8\""
                           : "one of \"float32\", \"bfloat16\", \"float16\"",
               v);
  }
}

void read_buffer(json::Reader& r, json::Element value, const json::Path& path,
                 const PlanOptions& options, NameStore& names, BufferLayout& buffer) {
  bool strategy_seen = false;
  json::read_members(r, value, path,
                     {"param_dtype", "grad_dtype", "expert_parallel", "layerwise", "strategy",
                      "num_shards", "numel", "numel_unpadded", "buckets", "params", "param_buffer"},
                     {"param_dtype", "grad_dtype", "expert_parallel", "layerwise", "num_shards",
                      "numel", "numel_unpadded", "buckets", "params"},
                     [&](std::size_t slot, json::Element v, const json::Path& p) {
                       switch (slot) {
                         case 0:
                           read_dtype(r, v, p, /*allow_uint8=*/true, buffer.key.param_dtype);
                           break;
                         case 1:
                           read_dtype(r, v, p, /*allow_uint8=*/false, buffer.key.grad_dtype);
                           break;
                         case 2:
                           buffer.key.expert_parallel = r.boolean(v, p);
                           break;
                         case 3:
                           buffer.key.layerwise = r.boolean(v, p);
                           break;
                         case 4:
                           if (auto s = parse_strategy(r.string(v, p))) {
                             buffer.strategy = *s;
                             strategy_seen = true;
                           } else {
                             r.expected(p, "one of \"sequential-dp\", \"layerwise\", \"unpadded\"",
                                        v);
                           }
                           break;
                         case 5:
                           buffer.num_shards = r.integer_or_null(v, p, 1, kMaxDp);
                           break;
                         case 6:
                           buffer.numel = r.integer(v, p, 0, kMaxInt);
                           break;
                         case 7:
                           buffer.numel_unpadded = r.integer(v, p, 0, kMaxInt);
                           break;
                         case 8:
                           read_buckets(r, v, p, buffer.buckets);
                           break;
                         case 9:
                           read_params(r, v, p, names, buffer.params);
                           break;
                         default:
                           read_param_buffer(r, v, p, buffer.param_buffer);
                           break;
                       }
                     });
  // The packed params are the buffer's params at other offsets.
  if (!r.failed() && buffer.param_buffer.packed) {
    ParamBufferLayout& packed = buffer.param_buffer;
    if (packed.params.size() != buffer.params.size()) {
      r.fail(path.field("param_buffer").field("params"),
             fmt::format("expected {} [start, end] pairs, one per param, got {}",
                         buffer.params.size(), packed.params.size()));
      return;
    }
    for (std::size_t k = 0; k < packed.params.size(); ++k) {
      packed.params[k].name = buffer.params[k].name;
      packed.params[k].bucket = buffer.params[k].bucket;
      packed.params[k].index = buffer.params[k].index;
    }
  }
  if (!strategy_seen) {
    buffer.strategy = options.strategy == Strategy::layerwise && !buffer.key.layerwise
                          ? Strategy::sequential_dp
                          : options.strategy;
  }
}

}  // namespace

std::string write_layout_json(const Layout& layout, std::string_view stats) {
  std::string text;
  std::size_t params = 0;
  for (const BufferLayout& b : layout.buffers) params += b.params.size() + b.buckets.size();
  text.reserve(1024 + 128 * params);
  json::Writer w(text);
  const PlanOptions& o = layout.options;
  w.raw("{\n  \"schema\": \"paramlayout.layout/v1\",\n  \"generator\": ")
      .quoted(layout.generator)
      .raw(",\n  \"model\": ")
      .optional(layout.model)
      .raw(",\n  \"manifest_sha256\": ")
      .quoted(layout.manifest_sha256)
      .raw(",\n  \"options\": {\"strategy\": \"")
      .raw(to_string(o.strategy))
      .raw("\", \"dp\": ")
      .integer(o.dp)
      .raw(", \"expert_dp\": ")
      .integer(o.expert_dp)
      .raw(", \"bucket_size\": ")
      .optional(o.bucket_size)
      .raw(", \"grad_reduce_in_fp32\": ")
      .boolean(o.grad_reduce_in_fp32)
      .raw(", \"pad_for_high_nccl_busbw\": ")
      .boolean(o.pad_for_high_nccl_busbw)
      .raw(", \"packer\": \"")
      .raw(to_string(o.packer))
      .raw("\"}");
  if (!stats.empty()) w.raw(",\n  \"stats\": ").raw(stats);
  w.raw(",\n  \"buffers\": [");
  const char* sep = "\n";
  for (const BufferLayout& buffer : layout.buffers) {
    w.raw(sep);
    write_buffer(w, buffer);
    sep = ",\n";
  }
  w.raw(layout.buffers.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return text;
}

Result<Layout> parse_layout(std::string_view text, std::string_view source) {
  json::Reader r(source);
  if (!r.parse(text) ||
      !json::check_document_schema(r, "paramlayout.layout", "paramlayout.manifest")) {
    return r.error();
  }
  const json::Path root;

  // Options first: buffers without a "strategy" take it from them.
  Layout layout;
  layout.source = std::string(source);
  json::Element options;
  if (r.root().at_key("options").get(options) == simdjson::SUCCESS) {
    read_options(r, options, root.field("options"), layout.options);
  }
  json::read_members(
      r, r.root(), root,
      {"schema", "generator", "model", "manifest_sha256", "options", "buffers", "stats"},
      {"schema", "manifest_sha256", "options", "buffers"},
      [&](std::size_t slot, json::Element v, const json::Path& p) {
        switch (slot) {
          case 1:
            layout.generator = r.string(v, p);
            break;
          case 2:
            layout.model = r.string_or_null(v, p);
            break;
          case 3:
            layout.manifest_sha256 = r.string(v, p);
            break;
          case 5: {
            if (!r.is_array(v, p)) return;
            std::size_t i = 0;
            for (json::Element item : simdjson::dom::array(v)) {
              read_buffer(r, item, p.item(i++), layout.options, *layout.names,
                          layout.buffers.emplace_back());
              if (r.failed()) return;
            }
            break;
          }
          case 6:
            layout.recorded_stats = simdjson::minify(v);
            break;
          default:
            break;
        }
      });
  if (r.failed()) return r.error();
  return layout;
}

}  // namespace paramlayout
