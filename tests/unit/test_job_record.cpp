// job.json read back: what job writes parses to the same record, malformed ones are refused
// with the place named, and check_job_record finds each figure job.json gets wrong.
#include <doctest/doctest.h>

#include "paramlayout/check_job.hpp"
#include "paramlayout/job_record.hpp"
#include "paramlayout/megatron_args.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

/// A small GPT on 16 GPUs: tp 2, pp 2 with 2 virtual chunks, so dp 4 and four chunks.
struct SmallJob {
  JobSpec spec;
  JobPlan plan;
  std::vector<JobFile> files;
  JobRecord record;
};

SmallJob small_job() {
  const Args args = test::small_gpt_args(8) + Args{"--vocab-size",
                                                   "1000",
                                                   "--tensor-model-parallel-size",
                                                   "2",
                                                   "--pipeline-model-parallel-size",
                                                   "2",
                                                   "--num-layers-per-virtual-pipeline-stage",
                                                   "2",
                                                   "--bf16",
                                                   "--use-distributed-optimizer",
                                                   "--seq-length",
                                                   "128"};
  SmallJob job;
  job.spec = expect_ok(job_from_megatron_args(args, 16, nullptr));
  job.spec.model_name = "small";
  job.plan = expect_ok(plan_job(job.spec));
  LaunchRecord launch;
  launch.world_size = 16;
  launch.args = args;
  job.files = job_files(job.spec, job.plan, launch);
  job.record = expect_ok(parse_job_json(job.files.back().content, "job.json"));
  return job;
}

std::string error_of(const std::string& text) {
  Result<JobRecord> r = parse_job_json(text, "job.json");
  REQUIRE_FALSE(r);
  return r.error().message;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_SUITE("job") {
  TEST_CASE("job.json reads back to the record job wrote, each chunk file's SHA-256 in it") {
    const SmallJob job = small_job();
    CHECK(job.files.back().name == "job.json");
    CHECK(job.files.size() == 2 * 4 + 1);
    const JobRecord& r = job.record;
    CHECK(r == job_record(job.spec, job.plan, r.launch, job.files));
    CHECK(r.world_size == 16);
    CHECK(r.dp == 4);  // 16 / (tp 2 x pp 2)
    REQUIRE(r.chunks.size() == 4);
    CHECK(r.chunks[3].name() == "stage1.chunk1");
    // The hash is of the file's bytes, computed here independently of job_record's lookup.
    CHECK(r.chunks[1].layout == "stage0.chunk1.layout.json");
    CHECK(r.chunks[1].layout_sha256 == sha256_hex(job.files[3].content));
    REQUIRE(r.launch);
    CHECK(r.launch->args[0] == "--num-layers");
    CHECK(r.launch->world_size == 16);
    CHECK(write_job_json(r) == job.files.back().content);
    REQUIRE(r.memory.size() == 2);                     // one per pipeline stage
    CHECK(r.memory[1].activations.terms.size() == 2);  // decoder layers, output and loss
    CHECK(r.memory[1].peak_bytes == r.memory[1].persistent_bytes + r.memory[1].activation_bytes);
  }

  TEST_CASE("job.json's memory must add up, one entry per stage in order") {
    const std::string text = small_job().files.back().content;
    const std::size_t peak = text.find("\"peak_bytes\": ") + 14;
    CHECK(error_of(text.substr(0, peak) + "1" + text.substr(peak))
              .find("/memory/stages/0/peak_bytes: expected the sum of its terms") !=
          std::string::npos);
    CHECK(error_of(replaced(text, "{\"stage\": 1, \"microbatches_in_flight\"",
                            "{\"stage\": 0, \"microbatches_in_flight\""))
              .find("/memory/stages/1: expected stage 1 of 2") != std::string::npos);
    CHECK(error_of(replaced(text, "\"param_buffers\": ", "\"param_buffers\": -"))
              .find("/memory/stages/0/persistent/param_buffers: expected an integer") !=
          std::string::npos);
  }

  TEST_CASE("a malformed job.json is refused, naming the place") {
    const std::string text = small_job().files.back().content;
    CHECK(error_of(replaced(text, "\"stage\": 1, \"chunk\": 0", "\"stage\": 0, \"chunk\": 0"))
              .find("job.json: /chunks/2: expected stage 1 chunk 0 here") != std::string::npos);
    CHECK(error_of(replaced(text, "\"pp\": 2", "\"pp\": 3"))
              .find("lists 4 chunks; pp 3 x vpp 2 makes 6") != std::string::npos);
    CHECK(error_of(replaced(text, "\"stage0.chunk1.layout.json\"", "\"../x.json\""))
              .find("/chunks/1/layout: expected a file name beside job.json") != std::string::npos);
    const std::size_t sha = text.find("\"layout_sha256\": \"") + 18;
    CHECK(error_of(text.substr(0, sha) + "XYZ" + text.substr(sha + 3))
              .find("/chunks/0/layout_sha256: expected 64 lowercase hex digits") !=
          std::string::npos);
    CHECK(error_of(replaced(text, "paramlayout.job/v1", "paramlayout.job/v2"))
              .find("unsupported version") != std::string::npos);
    CHECK(error_of(
              replaced(text, "\"stage0.chunk1.manifest.json\"", "\"stage0.chunk0.manifest.json\""))
              .find("names \"stage0.chunk0.manifest.json\" a second time") != std::string::npos);
  }

  TEST_CASE("check_job_record finds each figure job.json gets wrong") {
    SmallJob job = small_job();
    std::vector<JobChunkFiles> files;
    for (std::size_t i = 0; i < job.plan.chunks.size(); ++i) {
      files.push_back(
          {&job.record.chunks[i], &job.plan.chunks[i].manifest, &job.plan.chunks[i].layout});
    }
    CHECK(check_job_record(job.record, files).empty());
    auto first = [&](JobRecord changed) {
      for (std::size_t i = 0; i < files.size(); ++i) files[i].record = &changed.chunks[i];
      const std::vector<Violation> v = check_job_record(changed, files);
      for (std::size_t i = 0; i < files.size(); ++i) files[i].record = &job.record.chunks[i];
      return v.empty() ? std::string() : v.front().message();
    };
    JobRecord r = job.record;
    r.dp = 8;
    CHECK(first(r) == "job.json: records dp 8, its files give 4");
    r = job.record;
    r.chunks[2].param_elements += 1;
    CHECK(first(r).starts_with("stage1.chunk0: job.json records param elements"));
    r = job.record;
    r.chunks[1].bytes_per_rank.grads += 2;
    CHECK(first(r).starts_with("stage0.chunk1: job.json records grads per rank (bytes)"));
    r = job.record;
    r.dense_shards = 2;
    CHECK(first(r) == "stage0.chunk0: job.json records dense shards 2, its files give 4");
    r = job.record;
    r.heaviest_stage = 1 - r.heaviest_stage;
    CHECK(first(r).starts_with("job.json: records heaviest stage"));
    r = job.record;
    r.memory[1].persistent[2].bytes += 4;
    CHECK(first(r).starts_with("job.json: records stage 1's optimizer_state per rank (bytes)"));
    r = job.record;
    r.chunks[0].bucket_size = 12345;
    CHECK(first(r) == "stage0.chunk0: job.json records bucket size 12,345, its files give none");
  }
}
