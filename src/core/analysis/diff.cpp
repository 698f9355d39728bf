#include "paramlayout/diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "format/json_writer.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/stats.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout {
namespace {

/// A buffer's view of one slot: its placement and the owner of each element.
struct Located {
  const BufferLayout* buffer;
  const ParamSlot* slot;
};

std::optional<RankRange> owners_of(const BufferLayout& b, const ParamSlot& p) {
  if (b.strategy == Strategy::unpadded || !b.num_shards || p.bucket < 0 ||
      p.bucket >= static_cast<std::int64_t>(b.buckets.size()) || p.end <= p.start) {
    return std::nullopt;
  }
  const BucketRange& bucket = b.buckets[p.bucket];
  if (bucket.size() % *b.num_shards != 0 || p.start < bucket.start || p.end > bucket.end) {
    return std::nullopt;
  }
  return owner_ranks(bucket, *b.num_shards, p.start, p.end);
}

Placement placement(const Located& at) {
  return {at.buffer->key, at.slot->start, at.slot->end, at.slot->bucket,
          owners_of(*at.buffer, *at.slot)};
}

/// Where a param's elements go in one layout: element e is owned by rank (base + e) / shard.
struct Steps {
  std::int64_t base = 0;   ///< offset of element 0 from the bucket start
  std::int64_t shard = 0;  ///< 0: replicated on every rank
};

__extension__ using Wide = __int128;

Wide floor_div(Wide a, Wide b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// Sum over integer r in [from, to] of f(r * delta - c), where f is the overlap of rank r's
/// two element ranges as a function of their offset d: 0 up to -sx, rising to min(sx, sy),
/// flat, falling to 0 at sy.
Wide sum_overlaps(Wide from, Wide to, Wide sx, Wide sy, Wide delta, Wide c) {
  if (from > to) return 0;
  const auto f = [&](Wide d) {
    return std::max<Wide>(0, std::min(sx - std::max<Wide>(-d, 0), sy - std::max<Wide>(d, 0)));
  };
  if (delta == 0) return (to - from + 1) * f(-c);
  // Pieces [lo, hi) of d on which f = alpha + beta * d.
  const Wide p1 = std::min<Wide>(0, sy - sx);
  const Wide p2 = std::max<Wide>(0, sy - sx);
  const struct {
    Wide lo, hi, alpha, beta;
  } pieces[] = {{-sx, p1, sx, 1}, {p1, p2, std::min(sx, sy), 0}, {p2, sy, sy, -1}};
  Wide total = 0;
  for (const auto& piece : pieces) {
    if (piece.lo >= piece.hi) continue;
    // The r with lo <= r * delta - c < hi.
    Wide first = 0;
    Wide last = 0;
    if (delta > 0) {
      first = -floor_div(-(piece.lo + c), delta);  // ceil
      last = -floor_div(-(piece.hi + c), delta) - 1;
    } else {
      first = floor_div(-(piece.hi + c), -delta) + 1;
      last = floor_div(-(piece.lo + c), -delta);
    }
    first = std::max(first, from);
    last = std::min(last, to);
    if (first > last) continue;
    const Wide count = last - first + 1;
    const Wide sum_r = (first + last) * count / 2;
    total += count * (piece.alpha - piece.beta * c) + piece.beta * delta * sum_r;
  }
  return total;
}

/// Elements e in [0, n) that ranks x and y agree on owning, in closed form: time does not
/// grow with the number of ranks a param spans.
std::int64_t elements_keeping_owner(const Steps& x, const Steps& y, std::int64_t n) {
  const Wide bx = x.base, by = y.base, sx = x.shard, sy = y.shard;
  const Wide lo = std::max(bx / sx, by / sy);
  const Wide hi = std::min((bx + n - 1) / sx, (by + n - 1) / sy);
  if (lo > hi) return 0;
  // Rank r owns [r * s - b, (r + 1) * s - b) of the param in each, cut to [0, n) at the ends.
  const auto overlap = [&](Wide r) {
    const Wide start = std::max<Wide>({0, r * sx - bx, r * sy - by});
    const Wide end = std::min<Wide>({n, (r + 1) * sx - bx, (r + 1) * sy - by});
    return std::max<Wide>(0, end - start);
  };
  Wide same = overlap(lo);
  if (hi > lo) same += overlap(hi) + sum_overlaps(lo + 1, hi - 1, sx, sy, sx - sy, bx - by);
  return static_cast<std::int64_t>(same);
}

// Elements of a param whose owning rank differs between the two placements.
std::int64_t elements_changing_owner(const Located& a, const Located& b) {
  auto steps = [](const Located& l) {
    Steps s;
    if (!owners_of(*l.buffer, *l.slot)) return s;
    const BucketRange& bucket = l.buffer->buckets[l.slot->bucket];
    s.base = l.slot->start - bucket.start;
    s.shard = bucket.size() / *l.buffer->num_shards;
    return s;
  };
  const Steps x = steps(a);
  const Steps y = steps(b);
  const std::int64_t numel = a.slot->numel();
  if (x.shard == 0 || y.shard == 0) return x.shard == y.shard ? 0 : numel;
  return numel - elements_keeping_owner(x, y, numel);
}

BufferFigures figures(const BufferLayout& b) {
  // Valid buffers' params are disjoint and inside them, so their numels add up.
  return {static_cast<std::int64_t>(b.params.size()), static_cast<std::int64_t>(b.buckets.size()),
          b.numel, b.numel - b.param_numel().value_or(0), b.num_shards};
}

bool same_contract(const BufferLayout& a, const BufferLayout& b) {
  return a.num_shards == b.num_shards && a.numel == b.numel &&
         a.numel_unpadded == b.numel_unpadded && a.buckets == b.buckets && a.params == b.params;
}

Error too_large(const Layout& l, std::string_view what) {
  return Error{fmt::format("{}: {} more than {}, the most a 64-bit figure holds: too large",
                           l.source.empty() ? "layout" : l.source, what,
                           group_digits(std::numeric_limits<std::int64_t>::max()))};
}

Result<RankBytes> rank_bytes(const Layout& l) {
  RankBytes r;
  for (const BufferLayout& b : l.buffers) {
    const auto add = [&](std::int64_t& total, std::optional<std::int64_t> bytes) {
      const std::optional<std::int64_t> sum = bytes ? checked_add(total, *bytes) : std::nullopt;
      if (sum) total = *sum;
      return sum.has_value();
    };
    if (!add(r.params, param_buffer_bytes(b)) ||
        !add(r.grads, checked_mul(b.numel, dtype_bytes(b.key.grad_dtype)))) {
      return too_large(l, "the bytes per rank of its buffers add up to");
    }
  }
  return r;
}

void write_placement(json::Writer& w, const std::optional<Placement>& p) {
  if (!p) {
    w.raw("null");
    return;
  }
  w.raw("{\"buffer\": ")
      .quoted(describe(p->key))
      .raw(", \"start\": ")
      .integer(p->start)
      .raw(", \"end\": ")
      .integer(p->end)
      .raw(", \"bucket\": ")
      .integer(p->bucket)
      .raw(", \"ranks\": ");
  if (p->owners) {
    w.raw("[").integer(p->owners->first).raw(", ").integer(p->owners->last).raw("]");
  } else {
    w.raw("\"all\"");
  }
  w.raw("}");
}

void write_figures(json::Writer& w, const std::optional<BufferFigures>& f) {
  if (!f) {
    w.raw("null");
    return;
  }
  w.raw("{\"params\": ")
      .integer(f->params)
      .raw(", \"buckets\": ")
      .integer(f->buckets)
      .raw(", \"numel\": ")
      .integer(f->numel)
      .raw(", \"padding\": ")
      .integer(f->padding)
      .raw(", \"num_shards\": ")
      .optional(f->num_shards)
      .raw("}");
}

/// A PlanOptions field as JSON text.
std::string option_text(const PlanOptions& o, std::string_view name) {
  if (name == "strategy") return fmt::format("\"{}\"", to_string(o.strategy));
  if (name == "dp") return std::to_string(o.dp);
  if (name == "expert_dp") return std::to_string(o.expert_dp);
  if (name == "bucket_size") return o.bucket_size ? std::to_string(*o.bucket_size) : "null";
  if (name == "grad_reduce_in_fp32") return o.grad_reduce_in_fp32 ? "true" : "false";
  if (name == "pad_for_high_nccl_busbw") return o.pad_for_high_nccl_busbw ? "true" : "false";
  return fmt::format("\"{}\"", to_string(o.packer));
}

std::vector<OptionChange> option_changes(const PlanOptions& before, const PlanOptions& after) {
  std::vector<OptionChange> out;
  for (std::string_view name : {"strategy", "dp", "expert_dp", "bucket_size", "grad_reduce_in_fp32",
                                "pad_for_high_nccl_busbw", "packer"}) {
    std::string was = option_text(before, name);
    std::string now = option_text(after, name);
    if (was != now) out.push_back({name, std::move(was), std::move(now)});
  }
  return out;
}

std::vector<std::string> warnings_about(const Layout& before, const Layout& after) {
  std::vector<std::string> out;
  if (before.model && after.model && *before.model != *after.model) {
    out.push_back(
        fmt::format("different models: \"{}\" and \"{}\" (params are matched by name "
                    "across them)",
                    excerpt(*before.model, 40), excerpt(*after.model, 40)));
  }
  if (before.manifest_sha256 != after.manifest_sha256) {
    out.push_back(fmt::format("planned from different manifests (sha256 {}... and {}...)",
                              excerpt(before.manifest_sha256.substr(0, 12)),
                              excerpt(after.manifest_sha256.substr(0, 12))));
  }
  return out;
}

}  // namespace

std::size_t LayoutDiff::count(bool ParamChange::*flag) const {
  return static_cast<std::size_t>(std::count_if(changes.begin(), changes.end(),
                                                [flag](const ParamChange& c) { return c.*flag; }));
}

std::size_t LayoutDiff::added() const {
  return static_cast<std::size_t>(std::count_if(changes.begin(), changes.end(),
                                                [](const ParamChange& c) { return !c.before; }));
}

std::size_t LayoutDiff::removed() const {
  return static_cast<std::size_t>(
      std::count_if(changes.begin(), changes.end(), [](const ParamChange& c) { return !c.after; }));
}

bool LayoutDiff::identical() const {
  return options.empty() && changes.empty() &&
         std::none_of(buffers.begin(), buffers.end(), [](const BufferChange& b) {
           return b.contract_differs || !b.before || !b.after;
         });
}

std::string LayoutDiff::verdict() const {
  if (identical()) return "identical";
  std::vector<std::string> parts;
  auto part = [&](std::size_t n, std::string_view what) {
    if (n > 0) parts.push_back(fmt::format("{} {}", n, what));
  };
  std::vector<std::string_view> option_names;
  for (const OptionChange& o : options) option_names.push_back(o.name);
  part(count(&ParamChange::moved),
       count(&ParamChange::moved) == 1 ? "param moved" : "params moved");
  part(added(), "added");
  part(removed(), "removed");
  part(count(&ParamChange::resized), "resized");
  part(count(&ParamChange::owner_changed), "changed owner");
  const auto other = std::count_if(buffers.begin(), buffers.end(), [](const BufferChange& b) {
    return b.contract_differs || !b.before || !b.after;
  });
  if (parts.empty() && other > 0) {
    parts.push_back(fmt::format("{} buffer{} differ{} in buckets or padding only", other,
                                other == 1 ? "" : "s", other == 1 ? "s" : ""));
  }
  std::string out;
  if (!option_names.empty()) {
    out = fmt::format("options changed: {}", fmt::join(option_names, ", "));
    if (!parts.empty()) out += "; ";
  }
  out += fmt::format("{}", fmt::join(parts, ", "));
  if (owner_changed_elements > 0) {
    out += fmt::format("; {} elements of optimizer state change owner",
                       group_digits(owner_changed_elements));
  }
  return out;
}

Result<LayoutDiff> diff_layouts(const Layout& before, const Layout& after) {
  if (Result<void> valid = validate_structure(before); !valid) return valid.error();
  if (Result<void> valid = validate_structure(after); !valid) return valid.error();
  LayoutDiff d;
  d.options = option_changes(before.options, after.options);
  d.warnings = warnings_about(before, after);
  std::unordered_map<std::string_view, Located> old_slots;
  for (const BufferLayout& b : before.buffers) {
    for (const ParamSlot& p : b.params) old_slots.emplace(p.name, Located{&b, &p});
  }
  std::unordered_map<std::string_view, bool> in_new;
  for (const BufferLayout& b : after.buffers) {
    for (const ParamSlot& p : b.params) {
      in_new.emplace(p.name, true);
      const Located now{&b, &p};
      auto it = old_slots.find(p.name);
      if (it == old_slots.end()) {
        d.changes.push_back({p.name, std::nullopt, placement(now)});
        continue;
      }
      const Located& was = it->second;
      ParamChange c{p.name, placement(was), placement(now)};
      c.resized = was.slot->numel() != p.numel();
      c.moved = !c.resized && (was.buffer->key != b.key || was.slot->start != p.start);
      c.owner_changed = c.before->owners != c.after->owners;
      if (!c.resized) {
        const std::optional<std::int64_t> sum =
            checked_add(d.owner_changed_elements, elements_changing_owner(was, now));
        if (!sum) return too_large(after, "the elements that change owner add up to");
        d.owner_changed_elements = *sum;
      }
      if (c.resized || c.moved || c.owner_changed) d.changes.push_back(c);
    }
  }
  for (const BufferLayout& b : before.buffers) {
    for (const ParamSlot& p : b.params) {
      if (!in_new.count(p.name)) d.changes.push_back({p.name, placement({&b, &p}), std::nullopt});
    }
  }

  for (const BufferLayout& b : after.buffers) {
    BufferChange& c = d.buffers.emplace_back();
    c.key = b.key;
    c.after = figures(b);
    auto old = std::find_if(before.buffers.begin(), before.buffers.end(),
                            [&](const BufferLayout& o) { return o.key == b.key; });
    if (old != before.buffers.end()) {
      c.before = figures(*old);
      c.contract_differs = !same_contract(*old, b);
    }
  }
  for (const BufferLayout& b : before.buffers) {
    if (std::none_of(after.buffers.begin(), after.buffers.end(),
                     [&](const BufferLayout& n) { return n.key == b.key; })) {
      d.buffers.push_back({b.key, figures(b), std::nullopt, true});
    }
  }
  Result<RankBytes> bytes_before = rank_bytes(before);
  if (!bytes_before) return bytes_before.error();
  Result<RankBytes> bytes_after = rank_bytes(after);
  if (!bytes_after) return bytes_after.error();
  d.bytes_before = *bytes_before;
  d.bytes_after = *bytes_after;
  return d;
}

std::string diff_to_json(const LayoutDiff& d) {
  std::string text;
  json::Writer w(text);
  w.raw("{\n  \"identical\": ")
      .boolean(d.identical())
      .raw(",\n  \"verdict\": ")
      .quoted(d.verdict());
  w.raw(",\n  \"options\": [");
  const char* option_sep = "";
  for (const OptionChange& o : d.options) {
    w.raw(option_sep)
        .raw("{\"option\": ")
        .quoted(o.name)
        .raw(", \"before\": ")
        .raw(o.before)
        .raw(", \"after\": ")
        .raw(o.after)
        .raw("}");
    option_sep = ", ";
  }
  w.raw("],\n  \"warnings\": [");
  option_sep = "";
  for (const std::string& warning : d.warnings) {
    w.raw(option_sep).quoted(warning);
    option_sep = ", ";
  }
  w.raw("]");
  auto names = [&](std::string_view key, auto&& keep) {
    w.raw(",\n  \"").raw(key).raw("\": [");
    const char* sep = "";
    for (const ParamChange& c : d.changes) {
      if (!keep(c)) continue;
      w.raw(sep).quoted(c.name);
      sep = ", ";
    }
    w.raw("]");
  };
  names("added", [](const ParamChange& c) { return !c.before; });
  names("removed", [](const ParamChange& c) { return !c.after; });
  names("resized", [](const ParamChange& c) { return c.resized; });
  names("moved", [](const ParamChange& c) { return c.moved; });
  names("owner_changed", [](const ParamChange& c) { return c.owner_changed; });
  w.raw(",\n  \"owner_changed_elements\": ").integer(d.owner_changed_elements);
  w.raw(",\n  \"bytes_per_rank\": {\"before\": {\"params\": ")
      .integer(d.bytes_before.params)
      .raw(", \"grads\": ")
      .integer(d.bytes_before.grads)
      .raw("}, \"after\": {\"params\": ")
      .integer(d.bytes_after.params)
      .raw(", \"grads\": ")
      .integer(d.bytes_after.grads)
      .raw("}}");
  w.raw(",\n  \"buffers\": [");
  const char* sep = "\n    ";
  for (const BufferChange& b : d.buffers) {
    w.raw(sep).raw("{\"key\": ").quoted(describe(b.key)).raw(", \"before\": ");
    write_figures(w, b.before);
    w.raw(", \"after\": ");
    write_figures(w, b.after);
    w.raw(", \"differs\": ").boolean(b.contract_differs).raw("}");
    sep = ",\n    ";
  }
  w.raw(d.buffers.empty() ? "]" : "\n  ]");
  w.raw(",\n  \"changes\": [");
  sep = "\n    ";
  for (const ParamChange& c : d.changes) {
    w.raw(sep).raw("{\"name\": ").quoted(c.name).raw(", \"before\": ");
    write_placement(w, c.before);
    w.raw(", \"after\": ");
    write_placement(w, c.after);
    w.raw("}");
    sep = ",\n    ";
  }
  w.raw(d.changes.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return text;
}

}  // namespace paramlayout
