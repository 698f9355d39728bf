// schemas/*.schema.json are the published contract; the tool enforces them with its own
// single-pass reader over simdjson's document, which costs far less than valijson and says
// what was expected. Here valijson judges the same documents, and both must agree: every
// shipped manifest and every layout the tool writes is schema-valid, and every bad input in
// tests/cli/bad_inputs.json is rejected by both, or by the reader alone when only a
// semantic rule (unique names, 64-bit numel and offsets) is broken.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "paramlayout/job_record.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;
using paramlayout::test::operator+;

namespace {

class SchemaValidator {
 public:
  explicit SchemaValidator(const std::string& schema_file) {
    document_ = json::parse(read_text(source_path(schema_file)));
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(document_);
    parser.populateSchema(adapter, schema_);
  }

  bool valid(const json& document) const {
    valijson::Validator validator;
    valijson::adapters::NlohmannJsonAdapter adapter(document);
    return validator.validate(schema_, adapter, nullptr);
  }

 private:
  json document_;
  valijson::Schema schema_;
};

const SchemaValidator& manifest_schema() {
  static const SchemaValidator v("schemas/manifest.schema.json");
  return v;
}

const SchemaValidator& layout_schema() {
  static const SchemaValidator v("schemas/layout.schema.json");
  return v;
}

const SchemaValidator& job_schema() {
  static const SchemaValidator v("schemas/job.schema.json");
  return v;
}

}  // namespace

TEST_SUITE("schema") {
  TEST_CASE("every shipped manifest is schema-valid and read") {
    int manifests = 0;
    for (const char* dir : {"testdata/manifests", "testdata/reference/manifests"}) {
      for (const auto& entry : std::filesystem::directory_iterator(source_path(dir))) {
        if (entry.path().extension() != ".json") continue;
        const std::string text = read_text(entry.path());
        CAPTURE(entry.path().string());
        CHECK(manifest_schema().valid(json::parse(text)));
        CHECK(parse_manifest(text, entry.path().string()).ok());
        ++manifests;
      }
    }
    CHECK(manifests >= 44);
  }

  TEST_CASE("every layout the tool writes is schema-valid") {
    const Manifest m = expect_ok(parse_manifest(
        read_text(source_path("testdata/reference/manifests/mixtral-8x7b-tp2-ep8.json")), "m"));
    for (Strategy s : {Strategy::unpadded, Strategy::sequential_dp, Strategy::layerwise}) {
      PlanOptions o;
      o.strategy = s;
      o.dp = 8;
      o.expert_dp = 2;
      for (std::optional<std::int64_t> bucket : {std::optional<std::int64_t>(), {1000000}}) {
        o.bucket_size = bucket;
        CHECK(layout_schema().valid(json::parse(write_layout_json(expect_ok(plan(m, o))))));
      }
    }
    // A quantized buffer's param_buffer, packed (nvfp4) and in the grad buffer (mxfp8).
    const Manifest quantized = expect_ok(parse_manifest(
        R"({"schema": "paramlayout.manifest/v1", "params": [
             {"name": "a", "shape": [64, 96], "dtype": "bfloat16", "storage": "nvfp4"},
             {"name": "c", "shape": [32, 64], "dtype": "float16", "storage": "mxfp8"}]})",
        "q"));
    const json written = json::parse(write_layout_json(expect_ok(plan(quantized, PlanOptions{}))));
    CHECK(written["buffers"][0].contains("param_buffer"));
    CHECK(layout_schema().valid(written));
  }

  TEST_CASE(
      "job.json as job writes it is schema-valid; the reader and the schema refuse the "
      "same broken ones") {
    const test::Args args = test::small_gpt_args(4) + test::Args{"--vocab-size",
                                                                 "1000",
                                                                 "--pipeline-model-parallel-size",
                                                                 "2",
                                                                 "--bf16",
                                                                 "--use-distributed-optimizer"};
    const JobSpec spec = expect_ok(job_from_megatron_args(args, 8, nullptr));
    const JobPlan plan = expect_ok(plan_job(spec));
    LaunchRecord launch;
    launch.world_size = 8;
    launch.args = args;
    launch.files.push_back({"c.json", "../c.json", std::string(64, 'a'), "hf_config.json"});
    const json job = json::parse(job_files(spec, plan, launch).back().content);
    CHECK(job_schema().valid(job));
    const auto both_refuse = [](json broken) {
      CHECK_FALSE(job_schema().valid(broken));
      CHECK_FALSE(parse_job_json(broken.dump(), "job.json").ok());
    };
    json broken = job;
    broken["chunks"][0]["layout"] = "../x.json";
    both_refuse(broken);
    broken = job;
    broken["chunks"][1]["manifest_sha256"] = "XYZ";
    both_refuse(broken);
    broken = job;
    broken["launch"].erase("args");
    both_refuse(broken);
    broken = job;
    broken["launch"]["files"][0]["sha256"] = std::string(64, 'A');
    both_refuse(broken);
    broken = job;
    broken["launch"]["files"][0]["copy"] = "../c.json";
    both_refuse(broken);
  }

  TEST_CASE("the reader and the schema reject the same bad manifests") {
    const json cases = json::parse(read_text(source_path("tests/cli/bad_inputs.json")));
    int compared = 0;
    for (const json& c : cases) {
      if (!c.contains("schema_valid")) continue;  // syntax, file and option errors
      CAPTURE(c.at("name").get<std::string>());
      const json& manifest = c.at("manifest");
      CHECK(manifest_schema().valid(manifest) == c.at("schema_valid").get<bool>());
      Result<Manifest> read = parse_manifest(manifest.dump(), "m.json");
      const bool accepted = read.ok() && plan(*read, PlanOptions{}).ok();
      CHECK_FALSE(accepted);
      ++compared;
    }
    CHECK(compared >= 25);
  }

  TEST_CASE("the reader and the schema accept the same unusual but valid manifests") {
    const json valid = json::parse(R"({"schema": "paramlayout.manifest/v1.7", "x-tool": {},
      "params": [
        {"name": "s", "shape": [], "dtype": "float16", "future_field": [1]},
        {"name": "q", "shape": [1, 1, 1, 1, 1], "dtype": "float32", "storage": "nvfp4",
         "expert_parallel": false, "shared_embedding": true, "embedding_or_output": false,
         "use_muon": false, "gtp_remat_size": 9223372036854775807}
      ]})");
    CHECK(manifest_schema().valid(valid));
    CHECK(parse_manifest(valid.dump(), "m.json").ok());
    const json empty = json::parse(R"({"schema": "paramlayout.manifest/v1", "params": []})");
    CHECK(manifest_schema().valid(empty));
    CHECK(parse_manifest(empty.dump(), "m.json").ok());
  }
}
