// job.json (paramlayout.job/v1) read back, for the commands that take a job.
#include <fmt/format.h>

#include <limits>
#include <set>

#include "../format/json_reader.hpp"
#include "memory_json.hpp"
#include "paramlayout/job_record.hpp"

namespace paramlayout {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

std::vector<std::int64_t> integers(json::Reader& r, json::Element v, const json::Path& p) {
  std::vector<std::int64_t> out;
  if (!r.is_array(v, p)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(v)) {
    out.push_back(r.integer(item, p.item(i++), 0, kMaxInt));
    if (r.failed()) break;
  }
  return out;
}

std::vector<std::string> strings(json::Reader& r, json::Element v, const json::Path& p) {
  std::vector<std::string> out;
  if (!r.is_array(v, p)) return out;
  std::size_t i = 0;
  for (json::Element item : simdjson::dom::array(v)) {
    out.emplace_back(r.string(item, p.item(i++)));
    if (r.failed()) break;
  }
  return out;
}

/// A SHA-256 as job.json writes it: 64 lowercase hex digits.
std::string sha256(json::Reader& r, json::Element v, const json::Path& p) {
  const std::string_view text = r.string(v, p);
  const bool hex =
      text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  if (!r.failed() && !hex) r.expected(p, "64 lowercase hex digits (a SHA-256)", v);
  return std::string(text);
}

template <class T, class Parse>
void named(json::Reader& r, json::Element v, const json::Path& p, T& out, Parse parse,
           std::string_view what) {
  if (auto parsed = parse(r.string(v, p))) {
    out = *parsed;
  } else if (!r.failed()) {
    r.expected(p, what, v);
  }
}

void read_bytes(json::Reader& r, json::Element v, const json::Path& path, BytesPerRank& out) {
  json::read_members(r, v, path, {"params", "grads", "optimizer"}, {"params", "grads", "optimizer"},
                     [&](std::size_t slot, json::Element e, const json::Path& p) {
                       const std::int64_t n = r.integer(e, p, 0, kMaxInt);
                       (slot == 0 ? out.params : slot == 1 ? out.grads : out.optimizer) = n;
                     });
}

/// A chunk's file name: a plain name beside job.json, never a path out of its directory.
std::string file_name(json::Reader& r, json::Element v, const json::Path& p) {
  const std::string_view name = r.string(v, p, true);
  if (!r.failed() && (name.find('/') != std::string_view::npos || name == "." || name == "..")) {
    r.expected(p, "a file name beside job.json", v);
  }
  return std::string(name);
}

void read_chunk(json::Reader& r, json::Element v, const json::Path& path, JobRecordChunk& c) {
  json::read_members(
      r, v, path,
      {"stage", "chunk", "layers", "mtp_layers", "embedding", "output", "bucket_size", "manifest",
       "manifest_sha256", "layout", "layout_sha256", "param_elements", "bytes_per_rank"},
      {"stage", "chunk", "layers", "mtp_layers", "embedding", "output", "bucket_size", "manifest",
       "layout", "param_elements", "bytes_per_rank"},
      [&](std::size_t slot, json::Element e, const json::Path& p) {
        switch (slot) {
          case 0:
            c.stage = r.integer(e, p, 0, kMaxInt);
            break;
          case 1:
            c.chunk = r.integer(e, p, 0, kMaxInt);
            break;
          case 2:
            c.layers = integers(r, e, p);
            break;
          case 3:
            c.mtp_layers = integers(r, e, p);
            break;
          case 4:
            c.embedding = r.boolean(e, p);
            break;
          case 5:
            c.output = r.boolean(e, p);
            break;
          case 6:
            c.bucket_size = r.integer_or_null(e, p, 1, kMaxInt);
            break;
          case 7:
            c.manifest = file_name(r, e, p);
            break;
          case 8:
            c.manifest_sha256 = sha256(r, e, p);
            break;
          case 9:
            c.layout = file_name(r, e, p);
            break;
          case 10:
            c.layout_sha256 = sha256(r, e, p);
            break;
          case 11:
            c.param_elements = r.integer(e, p, 0, kMaxInt);
            break;
          default:
            read_bytes(r, e, p, c.bytes_per_rank);
            break;
        }
      });
}

/// A kept copy's name: only the config's is kept, always under the same name.
std::string config_copy(json::Reader& r, json::Element v, const json::Path& p) {
  std::string name(r.string(v, p, true));
  if (!r.failed() && name != kConfigCopy) {
    r.fail(p, fmt::format("expected \"{}\", got \"{}\"", kConfigCopy, excerpt(name)));
  }
  return name;
}

void read_launch(json::Reader& r, json::Element v, const json::Path& path, LaunchRecord& l) {
  json::read_members(
      r, v, path, {"world_size", "packer", "model", "hf_config", "files", "args"},
      {"world_size", "files", "args"}, [&](std::size_t slot, json::Element e, const json::Path& p) {
        switch (slot) {
          case 0:
            l.world_size = r.integer(e, p, 1, kMaxInt);
            break;
          case 1:
            l.packer = r.string(e, p, true);
            break;
          case 2:
            l.model = r.string_or_null(e, p);
            break;
          case 3:
            l.hf_config = r.string_or_null(e, p);
            break;
          case 4: {
            if (!r.is_array(e, p)) return;
            std::size_t i = 0;
            for (json::Element item : simdjson::dom::array(e)) {
              LaunchFile& f = l.files.emplace_back();
              json::read_members(r, item, p.item(i++), {"given", "path", "sha256", "copy"},
                                 {"given", "path", "sha256"},
                                 [&](std::size_t s, json::Element x, const json::Path& q) {
                                   if (s == 0) f.given = r.string(x, q, true);
                                   if (s == 1) f.path = r.string(x, q, true);
                                   if (s == 2) f.sha256 = sha256(r, x, q);
                                   if (s == 3) f.copy = config_copy(r, x, q);
                                 });
              if (r.failed()) return;
            }
            break;
          }
          default:
            l.args = strings(r, e, p);
            break;
        }
      });
}

/// Each (stage, chunk) of pp x vpp once, stage-major, each file named once.
void check_chunks(json::Reader& r, const JobRecord& job, const json::Path& path) {
  const ParallelConfig& p = job.parallel;
  if (static_cast<double>(p.pp) * static_cast<double>(p.vpp) !=
      static_cast<double>(job.chunks.size())) {
    r.fail(path, fmt::format("lists {} chunks; pp {} x vpp {} makes {}", job.chunks.size(), p.pp,
                             p.vpp, p.pp * p.vpp));
    return;
  }
  std::set<std::string> files = {"job.json"};
  for (std::size_t i = 0; i < job.chunks.size(); ++i) {
    const JobRecordChunk& c = job.chunks[i];
    const auto at = static_cast<std::int64_t>(i);
    if (c.stage != at / p.vpp || c.chunk != at % p.vpp) {
      r.fail(path.item(i), fmt::format("expected stage {} chunk {} here (stage-major), got {}",
                                       at / p.vpp, at % p.vpp, c.name()));
      return;
    }
    for (const std::string* name : {&c.manifest, &c.layout}) {
      if (!files.insert(*name).second) {
        r.fail(path.item(i), fmt::format("names \"{}\" a second time", excerpt(*name)));
        return;
      }
    }
  }
}

}  // namespace

bool looks_like_job_json(std::string_view text) {
  const std::size_t schema = text.find("\"schema\"");
  if (schema == std::string_view::npos) return false;
  const std::size_t value = text.find('"', text.find(':', schema));
  return value != std::string_view::npos && text.substr(value + 1).starts_with("paramlayout.job/");
}

Result<JobRecord> parse_job_json(std::string_view text, std::string_view source) {
  json::Reader r(source);
  if (!r.parse(text) || !json::check_document_schema(r, "paramlayout.job", "paramlayout.layout")) {
    return r.error();
  }
  const json::Path root;
  JobRecord job;
  ParallelConfig& par = job.parallel;
  json::read_members(
      r, r.root(), root,
      {"schema",
       "generator",
       "model",
       "world_size",
       "tp",
       "pp",
       "vpp",
       "cp",
       "ep",
       "etp",
       "dp",
       "expert_dp",
       "strategy",
       "packer",
       "param_dtype",
       "grad_dtype",
       "dense_shards",
       "expert_shards",
       "launch",
       "ignored_arguments",
       "notes",
       "chunks",
       "heaviest_stage",
       "optimizer_state",
       "memory"},
      {"schema", "world_size", "tp", "pp", "vpp", "cp", "ep", "etp", "dp", "expert_dp", "strategy",
       "grad_dtype", "ignored_arguments", "chunks", "heaviest_stage"},
      [&](std::size_t slot, json::Element v, const json::Path& p) {
        std::int64_t* const sizes[] = {&job.world_size, &par.tp,  &par.pp, &par.vpp,      &par.cp,
                                       &par.ep,         &par.etp, &job.dp, &job.expert_dp};
        if (slot >= 3 && slot <= 11) {
          *sizes[slot - 3] = r.integer(v, p, 1, kMaxInt);
          return;
        }
        switch (slot) {
          case 1:
            job.generator = r.string(v, p);
            break;
          case 2:
            job.model = r.string(v, p);
            break;
          case 12:
            named(r, v, p, job.strategy, parse_strategy,
                  "one of \"sequential-dp\", \"layerwise\", \"unpadded\"");
            break;
          case 13:
            named(r, v, p, job.packer, parse_packer, "\"megatron\" or \"balanced\"");
            break;
          case 14:
            named(
                r, v, p, job.param_dtype, [](auto s) { return parse_dtype(s); }, "a dtype");
            break;
          case 15:
            named(
                r, v, p, job.grad_dtype, [](auto s) { return parse_dtype(s); }, "a dtype");
            break;
          case 16:
            job.dense_shards = r.integer(v, p, 1, kMaxInt);
            break;
          case 17:
            job.expert_shards = r.integer(v, p, 1, kMaxInt);
            break;
          case 18:
            read_launch(r, v, p, job.launch.emplace());
            break;
          case 19:
            job.ignored_arguments = strings(r, v, p);
            break;
          case 20:
            job.notes = strings(r, v, p);
            break;
          case 21: {
            if (!r.is_array(v, p)) return;
            std::size_t i = 0;
            for (json::Element item : simdjson::dom::array(v)) {
              read_chunk(r, item, p.item(i++), job.chunks.emplace_back());
              if (r.failed()) return;
            }
            break;
          }
          case 22:
            json::read_members(r, v, p, {"stage", "bytes_per_rank"}, {"stage", "bytes_per_rank"},
                               [&](std::size_t s, json::Element e, const json::Path& q) {
                                 if (s == 0) job.heaviest_stage = r.integer(e, q, 0, kMaxInt);
                                 if (s == 1) read_bytes(r, e, q, job.heaviest_stage_bytes);
                               });
            break;
          case 23:
            job.optimizer_state = r.string(v, p);
            break;
          case 24:
            read_memory_json(r, v, p, job.memory_inputs, job.memory);
            break;
          default:
            break;
        }
      });
  if (!r.failed()) check_chunks(r, job, root.field("chunks"));
  for (std::size_t i = 0; !r.failed() && i < job.memory.size(); ++i) {
    if (job.memory[i].stage != static_cast<std::int64_t>(i) ||
        job.memory.size() != static_cast<std::size_t>(par.pp)) {
      r.fail(
          root.field("memory").field("stages").item(i),
          fmt::format("expected stage {} of {}, one entry per pipeline stage in order", i, par.pp));
    }
  }
  if (r.failed()) return r.error();
  return job;
}

}  // namespace paramlayout
