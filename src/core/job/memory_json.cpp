#include "memory_json.hpp"

#include <fmt/format.h>

#include <limits>
#include <set>

namespace paramlayout {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

void write_terms(json::Writer& w, const std::vector<MemoryTerm>& terms) {
  w.raw("{");
  for (std::size_t i = 0; i < terms.size(); ++i) {
    w.raw(i > 0 ? ", " : "").quoted(terms[i].key).raw(": ").integer(terms[i].bytes);
  }
  w.raw("}");
}

/// A term object: every member a byte count; a key paramlayout does not know keeps
/// `exactness`, the section's.
std::vector<MemoryTerm> read_terms(json::Reader& r, json::Element v, const json::Path& path,
                                   Exactness exactness) {
  std::vector<MemoryTerm> out;
  if (!r.is_object(v, path)) return out;
  std::set<std::string, std::less<>> seen;
  for (auto [key, value] : simdjson::dom::object(v)) {
    const json::Path p = path.field(key);
    if (!seen.emplace(key).second) {
      r.fail(p, "duplicate key");
      return out;
    }
    const MemoryTermInfo* info = find_memory_term(key);
    out.push_back(
        {std::string(key), r.integer(value, p, 0, kMaxInt), info ? info->exactness : exactness});
    if (r.failed()) return out;
  }
  return out;
}

/// `total` must be the sum of `terms`.
void require_sum(json::Reader& r, const json::Path& path, const std::vector<MemoryTerm>& terms,
                 std::int64_t total) {
  const std::optional<std::int64_t> sum = total_bytes(terms);
  if (!sum) {
    r.fail(path, "its terms' sum does not fit in 64 bits");
  } else if (*sum != total) {
    r.fail(path, fmt::format("expected the sum of its terms, {}, got {}", *sum, total));
  }
}

void read_stage(json::Reader& r, json::Element v, const json::Path& path, RankMemory& m) {
  json::read_members(r, v, path,
                     {"stage", "microbatches_in_flight", "persistent", "activations",
                      "persistent_bytes", "activation_bytes", "peak_bytes"},
                     {"stage", "microbatches_in_flight", "persistent", "activations",
                      "persistent_bytes", "activation_bytes", "peak_bytes"},
                     [&](std::size_t slot, json::Element e, const json::Path& p) {
                       switch (slot) {
                         case 0:
                           m.stage = m.activations.stage = r.integer(e, p, 0, kMaxInt);
                           break;
                         case 1:
                           m.activations.microbatches_in_flight = r.integer(e, p, 0, kMaxInt);
                           break;
                         case 2:
                           m.persistent = read_terms(r, e, p, Exactness::exact);
                           break;
                         case 3:
                           m.activations.terms = read_terms(r, e, p, Exactness::estimate);
                           break;
                         case 4:
                           m.persistent_bytes = r.integer(e, p, 0, kMaxInt);
                           break;
                         case 5:
                           m.activation_bytes = r.integer(e, p, 0, kMaxInt);
                           break;
                         case 6:
                           m.peak_bytes = r.integer(e, p, 0, kMaxInt);
                           break;
                         default:
                           break;
                       }
                     });
  if (r.failed()) return;
  require_sum(r, path.field("persistent_bytes"), m.persistent, m.persistent_bytes);
  if (r.failed()) return;
  require_sum(r, path.field("activation_bytes"), m.activations.terms, m.activation_bytes);
  if (r.failed()) return;
  require_sum(r, path.field("peak_bytes"),
              {{"persistent", m.persistent_bytes, Exactness::exact},
               {"activations", m.activation_bytes, Exactness::estimate}},
              m.peak_bytes);
}

void write_term_details(json::Writer& w, const std::vector<MemoryTerm>& terms) {
  w.raw("[");
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const MemoryTerm& t = terms[i];
    const MemoryTermInfo* info = find_memory_term(t.key);
    w.raw(i > 0 ? ", " : "").raw("{\"key\": ").quoted(t.key);
    w.raw(", \"bytes\": ").integer(t.bytes);
    w.raw(", \"exactness\": ").quoted(to_string(t.exactness));
    w.raw(", \"what\": ").quoted(info ? info->what : "");
    w.raw(", \"source\": ").quoted(info ? info->source : "").raw("}");
  }
  w.raw("]");
}

/// One stage's object; with `detail`, each term an object naming what it is.
void write_stage(json::Writer& w, const RankMemory& m, bool detail) {
  const auto terms = detail ? write_term_details : write_terms;
  w.raw("{\"stage\": ").integer(m.stage);
  w.raw(", \"microbatches_in_flight\": ").integer(m.activations.microbatches_in_flight);
  w.raw(", \"persistent\": ");
  terms(w, m.persistent);
  w.raw(", \"activations\": ");
  terms(w, m.activations.terms);
  w.raw(", \"persistent_bytes\": ").integer(m.persistent_bytes);
  w.raw(", \"activation_bytes\": ").integer(m.activation_bytes);
  w.raw(", \"peak_bytes\": ").integer(m.peak_bytes).raw("}");
}

}  // namespace

void write_memory_detail_json(json::Writer& w, const std::string& inputs,
                              const std::vector<RankMemory>& stages) {
  w.raw("{\"activations_for\": ").quoted(inputs).raw(", \"stages\": [");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    w.raw(i > 0 ? ", " : "");
    write_stage(w, stages[i], true);
  }
  w.raw("], \"heaviest_stage_by_peak\": ");
  w.integer(stages.empty() ? 0 : heaviest_peak_stage(stages)).raw("}");
}

void write_memory_json(json::Writer& w, const std::string& inputs,
                       const std::vector<RankMemory>& stages) {
  w.raw("{\"activations_for\": ").quoted(inputs).raw(", \"stages\": [");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    w.raw(i > 0 ? ",\n    " : "\n    ");
    write_stage(w, stages[i], false);
  }
  w.raw("\n  ]}");
}

void read_memory_json(json::Reader& r, json::Element v, const json::Path& path, std::string& inputs,
                      std::vector<RankMemory>& stages) {
  json::read_members(r, v, path, {"activations_for", "stages"}, {"activations_for", "stages"},
                     [&](std::size_t slot, json::Element e, const json::Path& p) {
                       if (slot == 0) {
                         inputs = r.string(e, p);
                         return;
                       }
                       if (!r.is_array(e, p)) return;
                       std::size_t i = 0;
                       for (json::Element item : simdjson::dom::array(e)) {
                         read_stage(r, item, p.item(i++), stages.emplace_back());
                         if (r.failed()) return;
                       }
                     });
}

}  // namespace paramlayout
