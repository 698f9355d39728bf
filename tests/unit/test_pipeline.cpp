// The pipeline split: Megatron-LM's own functions' split of the cases in
// testdata/pipeline/cases.json (written by tests/megatron/pipeline_differential.py from a
// Megatron-LM checkout), read from the same arguments, and the layout grammar worked by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "paramlayout/megatron_args.hpp"
#include "paramlayout/pipeline.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;

namespace {

const json& cases_file() {
  static const json cases = json::parse(read_text(source_path("testdata/pipeline/cases.json")));
  return cases;
}

/// The split `paramlayout job` makes of a case's arguments: read as Megatron-LM's arguments,
/// then placed.
Result<std::vector<ChunkPlacement>> split(const json& c) {
  std::vector<std::string> args = cases_file().at("model_args").get<std::vector<std::string>>();
  for (const json& a : c.at("args")) args.push_back(a.get<std::string>());
  Result<JobSpec> job =
      job_from_megatron_args(args, c.at("world_size").get<std::int64_t>(), nullptr);
  if (!job) return job.error();
  return place_layers(job->pipeline);
}

std::vector<std::string> stages(const std::string& layout) {
  return expect_ok(parse_pipeline_layout(layout));
}

}  // namespace

TEST_SUITE("pipeline") {
  TEST_CASE("every checked-in case splits as Megatron-LM's functions do") {
    for (const json& c : cases_file().at("cases")) {
      CAPTURE(c.at("name").get<std::string>());
      Result<std::vector<ChunkPlacement>> placed = split(c);
      if (!c.contains("chunks")) {
        REQUIRE_FALSE(placed);
        CHECK(placed.error().message.find(c.at("refused").get<std::string>()) != std::string::npos);
        continue;
      }
      if (!placed) FAIL(placed.error().message);
      const json& want = c.at("chunks");
      REQUIRE(placed->size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        const ChunkPlacement& p = (*placed)[i];
        const json& w = want[i];
        CAPTURE(i);
        CHECK(p.stage == w.at("stage").get<std::int64_t>());
        CHECK(p.chunk == w.at("chunk").get<std::int64_t>());
        CHECK(p.layers == w.at("layers").get<std::vector<std::int64_t>>());
        CHECK(p.mtp_layers == w.at("mtp_layers").get<std::vector<std::int64_t>>());
        CHECK((p.pre_process || !p.mtp_layers.empty()) == w.at("embedding").get<bool>());
        CHECK(p.post_process == w.at("output").get<bool>());
        CHECK(p.final_norm == w.at("final_norm").get<bool>());
      }
    }
  }

  TEST_CASE("the checked-in cases cover the jobs and rules they are meant to") {
    std::set<std::string> names;
    std::size_t refused = 0;
    for (const json& c : cases_file().at("cases")) {
      names.insert(c.at("name").get<std::string>());
      refused += c.contains("refused") ? 1 : 0;
    }
    CHECK(names.size() >= 40);
    CHECK(refused >= 15);
    for (const char* name :
         {"DeepSeek-V3: pp 16, layout Et*3|(tt|)*29m|L, 1 MTP layer",
          "Llama-3.1-405B: pp 16, vpp 2, account for embedding and loss",
          "Llama-3.1-405B: pp 16, vpp 2, first 6, last 8",
          "megatron test: 14 layers, pp 4, vpp 2, account for embedding and loss",
          "megatron test: 30 layers, pp 4, vpp 2, first 8, last 10"}) {
      CHECK_MESSAGE(names.count(name) == 1, name);
    }
  }

  TEST_CASE("DeepSeek-V3's layout, worked by hand") {
    // "Et*3|(tt|)*29m|L" on 16 stages: 32 layout stages, so 2 chunks per stage; layout stage
    // s is stage s % 16's chunk s / 16 and holds decoder layers 3 + 2 (s - 1) and the next.
    const json& all = cases_file().at("cases");
    const auto c = std::find_if(all.begin(), all.end(), [](const json& x) {
      return x.at("name") == "DeepSeek-V3: pp 16, layout Et*3|(tt|)*29m|L, 1 MTP layer";
    });
    REQUIRE(c != all.end());
    const std::vector<ChunkPlacement> placed = expect_ok(split(*c));
    REQUIRE(placed.size() == 32);
    CHECK(placed[0].layers == std::vector<std::int64_t>{0, 1, 2});
    CHECK(placed[1].layers == std::vector<std::int64_t>{33, 34});   // stage 0, chunk 1: s = 16
    CHECK(placed[27].layers == std::vector<std::int64_t>{59, 60});  // stage 13, chunk 1: s = 29
    CHECK(placed[27].final_norm);
    CHECK(placed[29].layers.empty());  // stage 14, chunk 1: the MTP layer and an embedding
    CHECK(placed[29].mtp_layers == std::vector<std::int64_t>{0});
    CHECK(placed[31].layers.empty());  // stage 15, chunk 1: the loss
    CHECK(placed[31].post_process);
    CHECK_FALSE(placed[31].final_norm);
  }

  TEST_CASE("layout strings unroll as Megatron-LM's grammar says") {
    CHECK(stages("Et*3|(tt|)*29m|L").size() == 32);
    CHECK(stages("Et*3|(tt|)*29,m|L") == stages("Et*3|(tt|)*29m|L"));    // commas are cosmetic
    CHECK(stages("Ett*3|L") == std::vector<std::string>{"Etttt", "L"});  // '*' takes one char
    CHECK(stages("(t*2|)*3L") == std::vector<std::string>{"tt", "tt", "tt", "L"});
    CHECK(stages("E||tL|") == std::vector<std::string>{"E", "", "tL", ""});
    CHECK(stages("(|)*2") == std::vector<std::string>{"", "", ""});
    CHECK(stages("Et*0L") == std::vector<std::string>{"EL"});
    CHECK(stages("Et*02L") == std::vector<std::string>{"EttL"});
    // "(tt)t" has no count after its group: the parentheses are left, and are not layers.
    CHECK_FALSE(parse_pipeline_layout("E(tt)tL"));
    CHECK_FALSE(parse_pipeline_layout("E()*2L"));
    CHECK_FALSE(parse_pipeline_layout("E t L"));
    const Result<std::vector<std::string>> nested = parse_pipeline_layout("((t|)*2)*2");
    REQUIRE_FALSE(nested);  // one level only: the outer parentheses are left over
    CHECK(nested.error().message.find("'(' is not a layer") != std::string::npos);
  }

  TEST_CASE("layout strings are written with runs folded, and read back as they were") {
    const std::vector<std::vector<std::string>> cases{{"Ett", "tt", "tt", "tmL"},
                                                      {"Et", "t", "t", "tL"},
                                                      {"EtL"},
                                                      {"Et", "tL"},
                                                      {"Et", "tt", "tt"},
                                                      {"E", "", "", "L"},
                                                      {"Ettt", "tt", "tt", "ttt", "ttt", "tmL"}};
    const std::vector<std::string> written{
        "Et*2|(t*2|)*2,tmL",         "Et|(t|)*2,tL", "EtL", "Et|tL", "Et|t*2|t*2", "E|(|)*2,L",
        "Et*3|(t*2|)*2,(t*3|)*2,tmL"};
    REQUIRE(cases.size() == written.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      CAPTURE(i);
      CHECK(format_pipeline_layout(cases[i]) == written[i]);
      CHECK(stages(written[i]) == cases[i]);
    }
  }
}
