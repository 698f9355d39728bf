// Helpers the Hugging Face architecture tests share: the shipped configs as JSON, synth on a
// JSON config (or its error), shapes and names of its params, and the tp / ep split check.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "paramlayout/synth.hpp"
#include "test_support.hpp"

namespace paramlayout::test::hf {

using nlohmann::json;
using Shape = std::vector<std::int64_t>;

inline json shipped(const std::string& config) {
  return json::parse(read_text(source_path("testdata/configs/" + config + ".json")));
}

inline SynthModel synth_json(const json& config, SynthOptions options = {}) {
  return expect_ok(synth_model(config.dump(), "config.json", options));
}

inline std::string synth_error(const json& config, SynthOptions options = {}) {
  Result<SynthModel> r = synth_model(config.dump(), "config.json", options);
  REQUIRE_FALSE(r);
  return r.error().message;
}

/// A shipped config with some fields set (`null` values kept: some configs mean "none").
inline json with(const std::string& config, const json& fields) {
  json c = shipped(config);
  for (const auto& [key, value] : fields.items()) c[key] = value;
  return c;
}

inline std::map<std::string, Shape> shapes(const SynthModel& m) {
  std::map<std::string, Shape> out;
  for (const ChunkParam& p : m.params) out[p.name] = p.shape;
  return out;
}

/// The names under `prefix`, in order, with the prefix taken off.
inline std::vector<std::string> names_under(const SynthModel& m, const std::string& prefix) {
  std::vector<std::string> out;
  for (const ChunkParam& p : m.params) {
    if (p.name.compare(0, prefix.size(), prefix) == 0) out.push_back(p.name.substr(prefix.size()));
  }
  return out;
}

inline std::ptrdiff_t position(const SynthModel& m, const std::string& name) {
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    if (m.params[i].name == name) return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

inline bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

/// `config` split tp ways: every param is the whole model's, or it with one dimension split
/// tp ways (the vocab padded to a multiple of 128 x tp first); and ep ways: the experts
/// divided among the ranks, the rest whole.
inline void check_splits(const json& config, std::int64_t tp, std::int64_t ep) {
  const SynthModel whole = synth_json(config);
  const auto full = shapes(whole);
  SynthOptions options;
  options.tp = tp;
  const SynthModel slice = synth_json(config, options);
  REQUIRE(slice.params.size() == whole.params.size());
  for (const ChunkParam& p : slice.params) {
    CAPTURE(p.name);
    Shape shape = full.at(p.name);
    if (p.embedding_or_output) shape[0] = (shape[0] + 128 * tp - 1) / (128 * tp) * (128 * tp);
    int split = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (p.shape[d] != shape[d]) {
        CHECK(p.shape[d] * tp == shape[d]);
        ++split;
      }
    }
    CHECK(split <= 1);
  }
  options.tp = 1;
  options.ep = ep;
  const SynthModel rank = synth_json(config, options);
  std::int64_t experts = 0;
  for (const ChunkParam& p : rank.params) experts += p.expert_parallel ? p.numel() : 0;
  CHECK(experts > 0);
  CHECK(whole.numel() - rank.numel() == experts * (ep - 1));
}

}  // namespace paramlayout::test::hf
