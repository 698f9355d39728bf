// Shared helpers for the unit tests.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/hf_config.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/synth.hpp"

namespace paramlayout::test {

/// The source tree's root, for testdata/ and schemas/.
inline std::string source_path(const std::string& relative) {
  return std::string(PARAMLAYOUT_SOURCE_ROOT) + "/" + relative;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The value of a Result that the test expects to succeed (fails the test otherwise).
template <class T>
T expect_ok(Result<T> result) {
  if (!result) FAIL(result.error().message);
  return std::move(result).value();
}

/// The model one of testdata/configs/ describes ("llama3-8b"), split as `options` says.
inline SynthModel synth_config(const std::string& config, const SynthOptions& options = {}) {
  const std::string path = source_path("testdata/configs/" + config + ".json");
  return expect_ok(synth_model(read_text(path), path, options));
}

/// A launch line's arguments, after `--`.
using Args = std::vector<std::string>;

/// `a`, then `b`.
inline Args operator+(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// A small GPT described by Megatron-LM's model arguments: `layers` layers, hidden size 64,
/// 4 heads, 128 positions, without a vocabulary.
inline Args small_gpt_args(std::int64_t layers) {
  return {"--num-layers",
          std::to_string(layers),
          "--hidden-size",
          "64",
          "--num-attention-heads",
          "4",
          "--max-position-embeddings",
          "128"};
}

/// The small GPT of small_gpt_args with a vocabulary of 1,000.
inline Args small_job_args(std::int64_t layers = 4) {
  return small_gpt_args(layers) + Args{"--vocab-size", "1000"};
}

/// testdata/configs/NAME.json read as --hf-config reads it.
inline HfModel hf_model(const std::string& name) {
  const std::string path = source_path("testdata/configs/" + name + ".json");
  return expect_ok(read_hf_config(read_text(path), path));
}

/// The job a launch line on `world` GPUs describes (`hf`: with --hf-config's model).
inline JobSpec job_spec(const Args& args, std::int64_t world, const HfModel* hf = nullptr) {
  return expect_ok(job_from_megatron_args(args, world, hf));
}

/// The error reading or planning the job gives.
inline std::string job_error(const Args& args, std::int64_t world) {
  Result<JobSpec> spec = job_from_megatron_args(args, world, nullptr);
  if (!spec) return spec.error().message;
  Result<JobPlan> plan = plan_job(*spec);
  REQUIRE_FALSE(plan);
  return plan.error().message;
}

}  // namespace paramlayout::test
