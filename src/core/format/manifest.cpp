#include "paramlayout/manifest.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <chrono>
#include <functional>
#include <limits>

#include "json_reader.hpp"
#include "json_writer.hpp"

namespace paramlayout {
namespace {

constexpr std::array<std::string_view, 4> kDTypeNames = {"float32", "bfloat16", "float16", "uint8"};
constexpr std::array<std::string_view, 4> kStorageNames = {"dense", "fp8", "mxfp8", "nvfp4"};
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
/// Largest parallel size a manifest may record.
constexpr std::int64_t kMaxParallelSize = std::int64_t{1} << 20;

template <class Enum, std::size_t N>
std::optional<Enum> find_name(const std::array<std::string_view, N>& names, std::string_view name,
                              std::size_t count = N) {
  for (std::size_t i = 0; i < count; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

template <std::size_t N>
std::string one_of(const std::array<std::string_view, N>& names, std::size_t count = N) {
  std::string out = "one of";
  for (std::size_t i = 0; i < count; ++i) out += fmt::format("{} \"{}\"", i ? "," : "", names[i]);
  return out;
}

void read_shape(json::Reader& r, json::Element value, const json::Path& path, Param& param) {
  if (!r.is_array(value, path)) return;
  std::size_t i = 0;
  std::int64_t numel = 1;
  bool overflow = false;
  for (json::Element dim : simdjson::dom::array(value)) {
    std::int64_t d = r.integer(dim, path.item(i++), 1, kMaxInt);
    if (r.failed()) return;
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
    param.shape.push_back(d);
  }
  if (overflow) {
    r.fail(path, fmt::format("numel (the product of the dims [{}]) does not fit in 64 bits",
                             excerpt(fmt::format("{}", fmt::join(param.shape, ", ")))));
  }
  param.numel = numel;
}

void read_param(json::Reader& r, json::Element value, const json::Path& path, NameStore& names,
                Param& param) {
  json::read_members(r, value, path,
                     {"name", "shape", "dtype", "storage", "expert_parallel", "shared_embedding",
                      "embedding_or_output", "use_muon", "gtp_remat_size"},
                     {"name", "shape", "dtype"},
                     [&](std::size_t slot, json::Element v, const json::Path& p) {
                       switch (slot) {
                         case 0:
                           param.name = names.add(r.string(v, p, /*non_empty=*/true));
                           break;
                         case 1:
                           read_shape(r, v, p, param);
                           break;
                         case 2:
                           if (auto d = parse_dtype(r.string(v, p))) {
                             param.dtype = *d;
                           } else {
                             r.expected(p, one_of(kDTypeNames, 3), v);
                           }
                           break;
                         case 3:
                           if (auto s = parse_storage(r.string(v, p))) {
                             param.storage = *s;
                           } else {
                             r.expected(p, one_of(kStorageNames), v);
                           }
                           break;
                         case 4:
                           param.expert_parallel = r.boolean(v, p);
                           break;
                         case 5:
                           param.shared_embedding = r.boolean(v, p);
                           break;
                         case 6:
                           param.embedding_or_output = r.boolean(v, p);
                           break;
                         case 7:
                           param.use_muon = r.boolean(v, p);
                           break;
                         case 8:
                           param.gtp_remat_size = r.integer(v, p, 1, kMaxInt);
                           break;
                         default:
                           break;
                       }
                     });
}

/// The optional `parallel` object: every member an integer, stage and chunk below pp and vpp.
void read_parallel(json::Reader& r, json::Element value, const json::Path& path,
                   ParallelConfig& parallel) {
  std::int64_t* const fields[] = {&parallel.tp, &parallel.pp,  &parallel.vpp,   &parallel.cp,
                                  &parallel.ep, &parallel.etp, &parallel.stage, &parallel.chunk};
  json::read_members(r, value, path, {"tp", "pp", "vpp", "cp", "ep", "etp", "stage", "chunk"}, {},
                     [&](std::size_t slot, json::Element v, const json::Path& p) {
                       *fields[slot] = r.integer(v, p, slot < 6 ? 1 : 0, kMaxParallelSize);
                     });
  if (r.failed()) return;
  if (parallel.stage >= parallel.pp) {
    r.fail(path.field("stage"),
           fmt::format("stage {} is not below pp {}", parallel.stage, parallel.pp));
  } else if (parallel.chunk >= parallel.vpp) {
    r.fail(path.field("chunk"),
           fmt::format("chunk {} is not below vpp {}", parallel.chunk, parallel.vpp));
  }
}

// Open addressing on (hash, position) pairs: no allocation per name, and names are only
// compared when their hashes match.
void check_unique_names(json::Reader& r, const std::vector<Param>& params,
                        const json::Path& params_path) {
  std::size_t capacity = 16;
  while (capacity < 2 * params.size()) capacity *= 2;
  constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::vector<std::uint64_t> table(capacity, kEmpty);
  const std::hash<std::string_view> hash;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::uint64_t h = hash(params[i].name);
    const std::uint64_t tag = h & ~std::uint64_t{0xFFFFFFFF};
    for (std::size_t slot = h & (capacity - 1);; slot = (slot + 1) & (capacity - 1)) {
      if (table[slot] == kEmpty) {
        table[slot] = tag | i;
        break;
      }
      const std::size_t other = table[slot] & 0xFFFFFFFF;
      if ((table[slot] & ~std::uint64_t{0xFFFFFFFF}) == tag &&
          params[other].name == params[i].name) {
        r.fail(params_path.item(i).field("name"),
               fmt::format("duplicate param name \"{}\" (first at /params/{})",
                           excerpt(params[i].name), other));
        return;
      }
    }
  }
}

}  // namespace

std::string_view to_string(DType dtype) { return kDTypeNames[static_cast<std::size_t>(dtype)]; }

std::string_view to_string(Storage storage) {
  return kStorageNames[static_cast<std::size_t>(storage)];
}

std::optional<DType> parse_dtype(std::string_view name, bool allow_uint8) {
  return find_name<DType>(kDTypeNames, name, allow_uint8 ? 4 : 3);
}

std::optional<DType> parse_dtype_alias(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view word = lower;
  if (word.starts_with("torch.")) word.remove_prefix(6);
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"bfloat16", DType::bfloat16}, {"bf16", DType::bfloat16}, {"float16", DType::float16},
      {"fp16", DType::float16},      {"half", DType::float16},  {"float32", DType::float32},
      {"fp32", DType::float32},      {"float", DType::float32}};
  for (const auto& [alias, dtype] : kAliases) {
    if (word == alias) return dtype;
  }
  return std::nullopt;
}

std::optional<Storage> parse_storage(std::string_view name) {
  return find_name<Storage>(kStorageNames, name);
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 4;
    case DType::bfloat16:
    case DType::float16:
      return 2;
    case DType::uint8:
      return 1;
  }
  return 1;
}

Result<Manifest> parse_manifest(std::string_view text, std::string_view source,
                                ParseTimings* timings) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  json::Reader r(source);
  if (!r.parse(text)) return r.error();
  Manifest manifest;
  manifest.sha256 = sha256_hex(text);
  const Clock::time_point parsed = Clock::now();
  const json::Path root;
  if (!json::check_document_schema(r, "paramlayout.manifest", "paramlayout.layout")) {
    return r.error();
  }

  manifest.source = std::string(source);
  json::read_members(
      r, r.root(), root, {"schema", "model", "params", "parallel"}, {"schema", "params"},
      [&](std::size_t slot, json::Element v, const json::Path& p) {
        if (slot == 1) manifest.model = std::string(r.string(v, p));
        if (slot == 3) read_parallel(r, v, p, manifest.parallel.emplace());
        if (slot != 2 || !r.is_array(v, p)) return;
        simdjson::dom::array items(v);
        manifest.params.reserve(items.size());
        std::size_t i = 0;
        for (json::Element item : items) {
          read_param(r, item, p.item(i++), *manifest.names, manifest.params.emplace_back());
          if (r.failed()) return;
        }
        check_unique_names(r, manifest.params, p);
      });
  if (r.failed()) return r.error();
  if (timings) {
    using Ms = std::chrono::duration<double, std::milli>;
    timings->parse_ms = Ms(parsed - start).count();
    timings->validate_ms = Ms(Clock::now() - parsed).count();
  }
  return manifest;
}

std::string write_manifest_json(const Manifest& manifest) {
  std::string text;
  json::Writer w(text);
  w.raw("{\"schema\": \"paramlayout.manifest/v1\"");
  if (manifest.model) w.raw(", \"model\": ").quoted(*manifest.model);
  if (manifest.parallel) {
    const ParallelConfig& p = *manifest.parallel;
    w.raw(",\n \"parallel\": {\"tp\": ").integer(p.tp).raw(", \"pp\": ").integer(p.pp);
    w.raw(", \"vpp\": ").integer(p.vpp).raw(", \"cp\": ").integer(p.cp);
    w.raw(", \"ep\": ").integer(p.ep).raw(", \"etp\": ").integer(p.etp);
    w.raw(", \"stage\": ").integer(p.stage).raw(", \"chunk\": ").integer(p.chunk).raw("}");
  }
  w.raw(",\n \"params\": [");
  const char* sep = "\n  ";
  for (const Param& p : manifest.params) {
    w.raw(sep).raw("{\"name\": ").quoted(p.name).raw(", \"shape\": [");
    for (std::size_t i = 0; i < p.shape.size(); ++i) {
      if (i > 0) w.raw(", ");
      w.integer(p.shape[i]);
    }
    w.raw("], \"dtype\": ").quoted(to_string(p.dtype));
    if (p.storage != Storage::dense) w.raw(", \"storage\": ").quoted(to_string(p.storage));
    if (p.expert_parallel) w.raw(", \"expert_parallel\": true");
    if (p.embedding_or_output) w.raw(", \"embedding_or_output\": true");
    if (p.shared_embedding) w.raw(", \"shared_embedding\": true");
    if (!p.use_muon) w.raw(", \"use_muon\": false");
    if (p.gtp_remat_size != 1) w.raw(", \"gtp_remat_size\": ").integer(p.gtp_remat_size);
    w.raw("}");
    sep = ",\n  ";
  }
  w.raw("\n]}\n");
  return text;
}

}  // namespace paramlayout
