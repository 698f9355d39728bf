// Typed, located access to a config.json's top-level fields, remembering which it read so
// that a shape-changing field no mapping understood is reported instead of dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../format/json_reader.hpp"

namespace paramlayout::hf {

/// Largest size or count a config may give, far above any model's: products of three stay
/// inside 64 bits.
inline constexpr std::int64_t kMaxDimension = (std::int64_t{1} << 24) - 1;

class Config {
 public:
  /// Reads the top-level object, or the object under `scope` ("text_config": the language model of
  /// a multimodal config) when it is not empty; there `tie_word_embeddings` is read from the top
  /// level where it is given (most of Megatron-Bridge's multimodal bridges read it there), unless
  /// `tie_in_scope` (Ministral 3's reads the language model's own).
  Config(json::Reader& reader, std::string_view architecture, std::string_view scope = {},
         bool tie_in_scope = false);
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;

  /// The value of `key` (nullopt when absent or null), or where the file leaves it out, its
  /// config class's default as transformers fills it (hf_defaults.hpp); marks it read.
  std::optional<json::Element> find(std::string_view key);
  bool has(std::string_view key) { return find(key).has_value(); }
  /// Whether the file itself gives `key` (a class default does not count); marks it read.
  bool in_file(std::string_view key);
  /// Whether `key` is present with the value null (which some configs use to mean "none",
  /// unlike an absent key, which takes the architecture's default); marks it read.
  bool is_null(std::string_view key);

  /// A required integer in [min, kMaxDimension].
  std::int64_t integer(std::string_view key, std::int64_t min = 1);
  /// An optional one.
  std::int64_t integer(std::string_view key, std::int64_t fallback, std::int64_t min);
  bool boolean(std::string_view key, bool fallback);
  double number(std::string_view key, double fallback);
  std::string string(std::string_view key, std::string_view fallback);
  /// An optional array of integers in [0, kMaxDimension] (empty when absent).
  std::vector<std::int64_t> integers(std::string_view key);
  /// An optional array of booleans (empty when absent).
  std::vector<bool> booleans(std::string_view key);
  /// An optional array of strings (empty when absent).
  std::vector<std::string> strings(std::string_view key);

  /// Records a problem with `key`'s value.
  void fail(std::string_view key, std::string_view what);
  bool failed() const { return reader_.failed(); }
  json::Reader& reader() { return reader_; }
  /// The object the fields are read from (the top level, or the scope's).
  json::Element object() const { return object_; }
  /// Where `key` is, for messages.
  json::Path path(std::string_view key) const { return base_.field(key); }
  std::string_view architecture() const { return architecture_; }
  bool was_read(std::string_view key) const { return read_.count(std::string(key)) > 0; }

 private:
  simdjson::simdjson_result<json::Element> lookup(std::string_view key) const;

  json::Reader& reader_;
  std::string_view architecture_;
  json::Element object_;
  json::Path root_;
  json::Path base_;
  bool tie_in_scope_ = false;
  /// The object's transformers config class, whose defaults fill the fields it omits.
  std::string model_type_;
  std::set<std::string> read_;
};

}  // namespace paramlayout::hf
