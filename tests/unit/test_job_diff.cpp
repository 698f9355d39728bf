// job diff: two jobs planned from Megatron-LM launch lines, written out and read back as job
// directories are, then compared. Expected figures are worked out by hand from the small
// GPT's shapes (hidden 64, 4 heads, ffn 256, biases, learned positions, vocabulary padded to
// a multiple of 128 x tp).
#include <doctest/doctest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "paramlayout/job_diff.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/megatron_args.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

/// A job as a job directory holds it, read back.
struct ReadBack {
  JobRecord record;
  std::vector<Manifest> manifests;
  std::vector<Layout> layouts;

  JobDiffInput input() const {
    JobDiffInput in;
    in.record = &record;
    for (std::size_t i = 0; i < record.chunks.size(); ++i) {
      in.chunks.push_back({&record.chunks[i], &manifests[i], &layouts[i]});
    }
    return in;
  }
};

const std::string& file(const std::vector<JobFile>& files, const std::string& name) {
  for (const JobFile& f : files) {
    if (f.name == name) return f.content;
  }
  FAIL("no file " << name);
  return files.front().content;
}

std::unique_ptr<ReadBack> job(const Args& args, std::int64_t world) {
  const JobSpec spec = expect_ok(job_from_megatron_args(args, world, nullptr));
  const JobPlan plan = expect_ok(plan_job(spec));
  LaunchRecord launch;
  launch.world_size = world;
  launch.args = args;
  const std::vector<JobFile> files = job_files(spec, plan, launch);
  auto out = std::make_unique<ReadBack>();
  out->record = expect_ok(parse_job_json(file(files, "job.json"), "job.json"));
  for (const JobRecordChunk& c : out->record.chunks) {
    out->manifests.push_back(expect_ok(parse_manifest(file(files, c.manifest), c.manifest)));
    out->layouts.push_back(expect_ok(parse_layout(file(files, c.layout), c.layout)));
  }
  return out;
}

/// The small GPT at pp 2 with the distributed optimizer.
Args gpt(std::int64_t layers, std::int64_t vocab) {
  const Args split{"--pipeline-model-parallel-size", "2", "--bf16", "--use-distributed-optimizer"};
  return test::small_gpt_args(layers) + Args{"--vocab-size", std::to_string(vocab)} + split;
}

/// One decoder layer of the small GPT: qkv [192, 64] + 192, proj [64, 64] + 64, two
/// LayerNorms fused into qkv and fc1 (2 x 64 each), fc1 [256, 64] + 256, fc2 [64, 256] + 64.
constexpr std::int64_t kLayerElements =
    192 * 64 + 192 + 64 * 64 + 64 + 2 * 64 + 2 * 64 + 256 * 64 + 256 + 64 * 256 + 64;
constexpr std::int64_t kParamsPerLayer = 12;

const JobChunkDiff& chunk(const JobDiff& d, std::int64_t stage) {
  for (const JobChunkDiff& c : d.chunks) {
    if (c.stage == stage) return c;
  }
  FAIL("no chunk");
  return d.chunks.front();
}

}  // namespace

TEST_SUITE("job-diff") {
  TEST_CASE("a job is identical to itself, and to the same launch planned again") {
    const auto a = job(gpt(4, 1000), 8);
    const auto b = job(gpt(4, 1000), 8);
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    CHECK(d.identical());
    CHECK(d.verdict() == "identical");
    CHECK(d.chunks.size() == 2);
    const json j = json::parse(job_diff_to_json(d));
    CHECK(j.at("identical") == true);
    CHECK(j.at("options").empty());
    for (const json& c : j.at("chunks")) CHECK(c.at("status") == "identical");
  }

  TEST_CASE("another generator alone leaves the jobs identical") {
    const auto a = job(gpt(4, 1000), 8);
    auto b = job(gpt(4, 1000), 8);
    b->record.generator = "paramlayout 9.9.9";
    for (Layout& l : b->layouts) l.generator = "paramlayout 9.9.9";
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    CHECK(d.identical());
    CHECK(d.generator_after == "paramlayout 9.9.9");
  }

  TEST_CASE("a model revision: more layers and a larger vocabulary, stage by stage") {
    // 4 layers at pp 2: stage 0 builds layers 0-1, stage 1 layers 2-3. 6 layers: 0-2, 3-5.
    const auto a = job(gpt(4, 1000), 8);
    const auto b = job(gpt(6, 2000), 8);
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    CHECK_FALSE(d.identical());
    CHECK(d.options.empty());
    REQUIRE(d.arguments.size() == 2);
    CHECK(d.arguments[0].argument == "--num-layers");
    CHECK(d.arguments[0].before == "4");
    CHECK(d.arguments[0].after == "6");
    CHECK(d.arguments[1].argument == "--vocab-size");
    // Layers 4 and 5 are new, in stage 1; layer 2 moves from stage 1 to stage 0; layer 3
    // stays in stage 1 (its first layer there now, no longer its second).
    CHECK(d.params_added() == 2 * kParamsPerLayer);
    CHECK(d.params_removed() == 0);
    CHECK(d.params_moved() == kParamsPerLayer);
    for (const JobParamChange& c : d.params) {
      if (!c.before) CHECK(c.after->stage == 1);
      if (c.moved) {
        CHECK(c.name.rfind("decoder.layers.2.", 0) == 0);
        CHECK(c.before->stage == 1);
        CHECK(c.after->stage == 0);
      }
    }
    // The vocabulary is padded to a multiple of 128: 1000 -> 1024 rows, 2000 -> 2048; the
    // embedding (stage 0) and the tied output layer's copy (stage 1) grow.
    REQUIRE(d.params_resized() == 2);
    for (const JobParamChange& c : d.params) {
      if (!c.resized) continue;
      CHECK((c.name == "embedding.word_embeddings.weight" || c.name == "output_layer.weight"));
      CHECK(c.before->shape == std::vector<std::int64_t>{1024, 64});
      CHECK(c.after->shape == std::vector<std::int64_t>{2048, 64});
    }
    const JobChunkDiff& first = chunk(d, 0);
    const JobChunkDiff& last = chunk(d, 1);
    CHECK_FALSE(first.identical);
    CHECK(first.params_moved_in == kParamsPerLayer);
    CHECK(first.params_resized == 1);
    CHECK(last.params_added == 2 * kParamsPerLayer);
    CHECK(last.params_moved_out == kParamsPerLayer);
    // Each stage gains one layer and 1024 rows of 64.
    const std::int64_t gain = kLayerElements + 1024 * 64;
    CHECK(first.after->param_elements - first.before->param_elements == gain);
    CHECK(last.after->param_elements - last.before->param_elements == gain);
    // Both buckets of each chunk (the layers', and the embedding's or output layer's own)
    // grow or shift.
    CHECK(first.buckets_moved == 2);
    CHECK(last.buckets_moved == 2);
    CHECK(d.verdict() ==
          "2 launch arguments changed; params: 24 added, 2 resized, 12 moved to another chunk; "
          "2 of 2 chunks differ");
  }

  TEST_CASE("a world-size change: dp, the shards and the optimizer state per rank") {
    const auto a = job(gpt(4, 1000), 8);
    const auto b = job(gpt(4, 1000), 16);
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    CHECK_FALSE(d.identical());
    std::vector<std::string> names;
    for (const OptionChange& o : d.options) names.emplace_back(o.name);
    // world / (tp x pp x cp): 8 / 2 = 4 -> 16 / 2 = 8, for the dense and expert buffers.
    CHECK(names == std::vector<std::string>{"world_size", "dp", "expert_dp", "dense_shards",
                                            "expert_shards"});
    CHECK(d.options[1].before == "4");
    CHECK(d.options[1].after == "8");
    CHECK(d.arguments.empty());
    CHECK(d.params.empty());
    for (const JobChunkDiff& c : d.chunks) {
      CHECK_FALSE(c.identical);
      // Params and grads are whole on every rank; the 12 bytes of optimizer state per element
      // are sharded over dp, so twice the ranks hold half as much (up to padding).
      CHECK(c.after->bytes_per_rank.params == c.before->bytes_per_rank.params);
      CHECK(c.after->bytes_per_rank.grads == c.before->bytes_per_rank.grads);
      const double ratio = static_cast<double>(c.before->bytes_per_rank.optimizer) /
                           static_cast<double>(c.after->bytes_per_rank.optimizer);
      CHECK(ratio == doctest::Approx(2.0).epsilon(0.01));
      REQUIRE(c.layout);
      CHECK(c.layout->options.front().name == "dp");
      // Bucket ends are padded to lcm(dp, 128): 128 at dp 4 and at dp 8, the same bounds.
      CHECK(c.buckets_moved == 0);
    }
  }

  TEST_CASE("a pipeline change: chunks only in one job are listed as added or removed") {
    const auto a = job(test::small_gpt_args(4) + Args{"--vocab-size", "1000"}, 4);
    const auto b = job(gpt(4, 1000), 4);
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    REQUIRE(d.chunks.size() == 2);
    CHECK(d.chunks[1].before == nullptr);
    CHECK(d.chunks[1].after != nullptr);
    CHECK(d.chunks_differing() == 2);
    // Layers 2 and 3 and the final norm move to the new stage 1.
    CHECK(d.params_moved() == 2 * kParamsPerLayer + 2);
    const json j = json::parse(job_diff_to_json(d));
    CHECK(j.at("chunks").at(1).at("status") == "added");
    CHECK(j.at("chunks").at(1).at("before").is_null());
  }

  TEST_CASE("the JSON holds every part, and the layouts' diff per chunk") {
    const auto a = job(gpt(4, 1000), 8);
    const auto b = job(gpt(6, 2000), 16);
    const JobDiff d = expect_ok(diff_jobs(a->input(), b->input()));
    const json j = json::parse(job_diff_to_json(d));
    for (const char* key : {"identical", "verdict", "generator", "options", "heaviest_stage",
                            "launch", "ignored_arguments", "notes", "config", "params", "chunks"}) {
      CHECK(j.contains(key));
    }
    CHECK(j.at("identical") == false);
    CHECK(j.at("options").at(0) == json{{"option", "world_size"}, {"before", 8}, {"after", 16}});
    CHECK(j.at("launch").at("arguments").at(0) ==
          json{{"argument", "--num-layers"}, {"before", "4"}, {"after", "6"}});
    CHECK(j.at("params").at("added").size() == 24);
    CHECK(j.at("params").at("resized").at(0).at("after").at("shape") == json{2048, 64});
    const json& first = j.at("chunks").at(0);
    CHECK(first.at("status") == "differs");
    CHECK(first.at("layout").at("options").at(0).at("option") == "dp");
    CHECK(first.at("after").at("layers") == json{0, 1, 2});
  }

  TEST_CASE("launch arguments as people read them") {
    const Args before{"--num-layers", "61", "--bf16", "--data-path", "/a", "/b", "--lr", "-1"};
    const Args after{"--num-layers",        "62",   "--data-path", "/a",
                     "--fp8-format=hybrid", "--lr", "-1"};
    const std::vector<ArgumentChange> c = diff_arguments(before, after);
    REQUIRE(c.size() == 4);
    CHECK((c[0].argument == "--num-layers" && c[0].before == "61" && c[0].after == "62"));
    CHECK((c[1].argument == "--data-path" && c[1].before == "/a /b" && c[1].after == "/a"));
    CHECK((c[2].argument == "--fp8-format" && !c[2].before && c[2].after == "hybrid"));
    CHECK((c[3].argument == "--bf16" && c[3].before == "" && !c[3].after));
  }

  TEST_CASE("config fields key by key, nested keys as a.b") {
    const auto fields = expect_ok(diff_json_fields(
        R"({"a": 1, "b": {"c": 2, "d": [1, 2]}, "e": "x", "g": {"h": true}})", "old.json",
        R"({"a": 1, "b": {"c": 3, "d": [1, 2, 3]}, "f": null, "g": {"h": true}})", "new.json"));
    REQUIRE(fields.size() == 4);
    CHECK((fields[0].key == "b.c" && fields[0].before == "2" && fields[0].after == "3"));
    CHECK((fields[1].key == "b.d" && fields[1].before == "[1,2]" && fields[1].after == "[1,2,3]"));
    CHECK((fields[2].key == "f" && !fields[2].before && fields[2].after == "null"));
    CHECK((fields[3].key == "e" && fields[3].before == "\"x\"" && !fields[3].after));
    CHECK_FALSE(diff_json_fields("[1]", "old.json", "{}", "new.json"));
  }

  TEST_CASE("a config whose bytes are not the recorded ones is not compared") {
    const auto a = job(gpt(4, 1000), 8);
    auto b = job(gpt(4, 1000), 8);
    const std::string old_config = R"({"vocab_size": 1000})";
    const std::string new_config = R"({"vocab_size": 2000})";
    a->record.launch->hf_config = "old.json";
    a->record.launch->files.push_back({"old.json", "old.json", sha256_hex(old_config), ""});
    b->record.launch->hf_config = "new.json";
    b->record.launch->files.push_back({"new.json", "new.json", sha256_hex(new_config), ""});
    JobDiffInput old_input = a->input();
    JobDiffInput new_input = b->input();
    old_input.config_text = old_config;
    new_input.config_text = new_config;
    JobDiff d = expect_ok(diff_jobs(old_input, new_input));
    CHECK(d.config.compared);
    REQUIRE(d.config.fields.size() == 1);
    CHECK(d.config.fields[0].after == "2000");
    CHECK_FALSE(d.identical());

    const std::string edited = R"({"vocab_size": 4000})";
    new_input.config_text = edited;
    d = expect_ok(diff_jobs(old_input, new_input));
    CHECK_FALSE(d.config.compared);
    CHECK(d.config.not_compared.find("the new job's new.json changed since it was planned") !=
          std::string::npos);
    new_input.config_text.reset();
    new_input.config_problem = "new.json: no such file";
    d = expect_ok(diff_jobs(old_input, new_input));
    CHECK(d.config.not_compared == "new.json: no such file");
  }
}
