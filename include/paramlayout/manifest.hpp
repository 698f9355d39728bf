// Manifest v1: a model chunk's trainable parameters in model-definition order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/name_store.hpp"

namespace paramlayout {

/// Element type of a parameter or of a buffer.
enum class DType : std::uint8_t { float32, bfloat16, float16, uint8 };

/// How a parameter is stored; anything but `dense` lives in a `uint8` param buffer.
enum class Storage : std::uint8_t { dense, fp8, mxfp8, nvfp4 };

std::string_view to_string(DType dtype);
std::string_view to_string(Storage storage);
/// Parses a dtype name as written in manifests and layouts (`uint8` only where `allow_uint8`).
std::optional<DType> parse_dtype(std::string_view name, bool allow_uint8 = false);

/// Parses a param dtype as people write it on a command line, in any case: the manifest's
/// names and torch's and Megatron-LM's (`bf16`, `fp16`, `half`, `fp32`, `float`,
/// `torch.bfloat16`, ...).
std::optional<DType> parse_dtype_alias(std::string_view name);
std::optional<Storage> parse_storage(std::string_view name);
/// Bytes per element.
int dtype_bytes(DType dtype);

/// One trainable parameter (Megatron-LM attribute names in comments).
struct Param {
  std::string_view name;            ///< kept by the Manifest's NameStore (or static text)
  std::vector<std::int64_t> shape;  ///< empty for a scalar
  std::int64_t numel = 1;           ///< product of `shape`, checked to fit in 64 bits
  DType dtype = DType::float32;
  Storage storage = Storage::dense;
  bool expert_parallel = false;      ///< `allreduce == False`
  bool shared_embedding = false;     ///< tied embedding copy on a pipeline edge stage
  bool embedding_or_output = false;  ///< `is_embedding_or_output_parameter`
  bool use_muon = true;              ///< `use_muon`
  std::int64_t gtp_remat_size = 1;   ///< `gtp_remat_size` (scales dim 0 of the Muon cost)
};

/// How the model was split when the chunk was made, in Megatron-LM's terms: its parallel
/// sizes and which pipeline stage and virtual chunk this is.
struct ParallelConfig {
  std::int64_t tp = 1;     ///< tensor parallel
  std::int64_t pp = 1;     ///< pipeline parallel
  std::int64_t vpp = 1;    ///< virtual pipeline chunks per stage
  std::int64_t cp = 1;     ///< context parallel
  std::int64_t ep = 1;     ///< expert parallel
  std::int64_t etp = 1;    ///< expert tensor parallel
  std::int64_t stage = 0;  ///< pipeline stage, 0-based
  std::int64_t chunk = 0;  ///< virtual chunk within the stage, 0-based

  bool operator==(const ParallelConfig&) const = default;
};

/// A parsed and validated manifest.
struct Manifest {
  std::string source;  ///< where it was read from, for messages
  std::shared_ptr<NameStore> names = std::make_shared<NameStore>();  ///< keeps Param::name
  std::optional<std::string> model;
  std::optional<ParallelConfig> parallel;  ///< recorded by synth and job
  std::vector<Param> params;
  std::string sha256;  ///< of the manifest's bytes, lowercase hex
};

/// Milliseconds spent in each phase of parse_manifest, for `plan --timings`.
struct ParseTimings {
  double parse_ms = 0;     ///< JSON syntax and the SHA-256 of the bytes
  double validate_ms = 0;  ///< schema rules, semantic rules, building the Manifest
};

/// Parses manifest v1 JSON text, enforcing schemas/manifest.schema.json and the semantic
/// rules (unique names, numel fits in 64 bits). `source` names the text in errors.
Result<Manifest> parse_manifest(std::string_view text, std::string_view source,
                                ParseTimings* timings = nullptr);

/// Manifest v1 JSON text of `manifest`: schema, model (when known), parallel (when recorded)
/// and one line per param, whose optional members are written only where they differ from
/// their defaults. parse_manifest reads it back to the same manifest.
std::string write_manifest_json(const Manifest& manifest);

/// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace paramlayout
