// VerifySession: layouts of different dp verified one after another on one backend, each as
// verify_layout verifies it alone; and a job's report, whose chunks hold a layout's report.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "paramlayout/verify.hpp"
#include "reference_cases.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::reference_cases;

namespace {

std::int64_t numel(const Layout& l) {
  std::int64_t n = 0;
  for (const BufferLayout& b : l.buffers) n += b.numel;
  return n;
}

/// Small reference cases of every dp they hold, dp first seen first.
std::vector<const test::ReferenceCase*> cases_of_each_dp() {
  std::vector<const test::ReferenceCase*> picked;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (const test::ReferenceCase& c : reference_cases()) {
    if (numel(c.layout) > 20'000'000) continue;
    if (seen.insert({c.layout.options.dp, c.layout.options.expert_dp}).second) {
      picked.push_back(&c);
    }
  }
  return picked;
}

}  // namespace

TEST_SUITE("verify") {
  TEST_CASE("a session verifies layouts of any dp in turn, each as verify_layout does alone") {
    const std::vector<const test::ReferenceCase*> cases = cases_of_each_dp();
    REQUIRE(cases.size() >= 4);
    VerifyOptions options;
    options.backend = BackendChoice::cpu;
    options.gpus = 4;
    VerifySession session(options);
    for (const test::ReferenceCase* c : cases) {
      CAPTURE(c->id);
      const VerifyReport in_turn = expect_ok(session.verify(c->layout, c->manifest));
      const VerifyReport alone = expect_ok(verify_layout(c->layout, c->manifest, options));
      CHECK(in_turn.ok());
      CHECK(in_turn.backend == alone.backend);
      REQUIRE(in_turn.buckets.size() == alone.buckets.size());
      std::int64_t elements = 0;
      for (std::size_t i = 0; i < alone.buckets.size(); ++i) {
        const BucketReport& b = in_turn.buckets[i];
        const BufferLayout& buffer = c->layout.buffers[b.buffer];
        CHECK(b.ranks == buffer.num_shards.value_or(1));
        CHECK(b.devices == alone.buckets[i].devices);
        CHECK(b.elements == alone.buckets[i].elements);
        elements += b.elements;
      }
      CHECK(elements == numel(c->layout));
    }
  }

  TEST_CASE("the backend starts once: its note comes with the first layout only") {
    // Without a GPU, automatic falls back to the cpu backend with a note; with one, nccl
    // starts without. Either way the later layouts reuse it and say nothing more.
    const test::ReferenceCase& c = *cases_of_each_dp().front();
    VerifySession session(VerifyOptions{});
    const VerifyReport first = expect_ok(session.verify(c.layout, c.manifest));
    for (int i = 0; i < 2; ++i) {
      const VerifyReport again = expect_ok(session.verify(c.layout, c.manifest));
      CHECK(again.ok());
      CHECK(again.notes.empty());
      CHECK(again.backend == first.backend);
    }
  }

  TEST_CASE("a broken layout in a session gets its violations, and the next one its data pass") {
    const std::vector<const test::ReferenceCase*> cases = cases_of_each_dp();
    Layout broken = cases[0]->layout;
    broken.buffers[0].num_shards = 3;
    VerifyOptions options;
    options.backend = BackendChoice::cpu;
    VerifySession session(options);
    const VerifyReport r = expect_ok(session.verify(broken, cases[0]->manifest));
    CHECK_FALSE(r.violations.empty());
    CHECK(r.buckets.empty());
    CHECK(r.backend.empty());  // no backend started for it
    const VerifyReport next = expect_ok(session.verify(cases[1]->layout, cases[1]->manifest));
    CHECK(next.ok());
    CHECK(next.backend.rfind("cpu", 0) == 0);
  }

  TEST_CASE("a job's report: totals, the failed chunks, and per chunk a layout's report") {
    const std::vector<const test::ReferenceCase*> cases = cases_of_each_dp();
    VerifyOptions options;
    options.backend = BackendChoice::cpu;
    VerifySession session(options);
    std::vector<ChunkVerifyReport> chunks;
    Layout broken = cases[1]->layout;
    broken.buffers[0].num_shards = 3;
    chunks.push_back({"stage0.chunk0", 0, 0, &cases[0]->layout,
                      expect_ok(session.verify(cases[0]->layout, cases[0]->manifest))});
    chunks.push_back(
        {"stage1.chunk0", 1, 0, &broken, expect_ok(session.verify(broken, cases[1]->manifest))});
    const nlohmann::json j = nlohmann::json::parse(verify_job_report_json("ds/job.json", chunks));
    CHECK(j.at("job") == "ds/job.json");
    CHECK(j.at("ok") == false);
    CHECK(j.at("chunks_verified") == 2);
    CHECK(j.at("failed") == nlohmann::json::array({"stage1.chunk0"}));
    CHECK(j.at("elements") == numel(cases[0]->layout));
    CHECK(j.at("mismatches") == 0);
    REQUIRE(j.at("chunks").size() == 2);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      nlohmann::json chunk = j.at("chunks")[i];
      CHECK(chunk.at("stage") == chunks[i].stage);
      CHECK(chunk.at("chunk") == chunks[i].chunk);
      CHECK(chunk.at("name") == chunks[i].name);
      CHECK(chunk.at("dp") == chunks[i].layout->options.dp);
      CHECK(chunk.at("expert_dp") == chunks[i].layout->options.expert_dp);
      for (const char* key : {"stage", "chunk", "name", "dp", "expert_dp"}) chunk.erase(key);
      CHECK(chunk ==
            nlohmann::json::parse(verify_report_json(chunks[i].report, *chunks[i].layout)));
    }
  }
}
