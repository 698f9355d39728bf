// A job's figures: stages as their chunks added up by hand, the busiest stage the first of
// equals, job.json's bytes per rank in place of a layout's, what a chunk builds in words, and
// the JSON's keys in order.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "paramlayout/job_stats.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

JobRecordChunk chunk(std::int64_t stage, std::int64_t index, BytesPerRank bytes) {
  JobRecordChunk c;
  c.stage = stage;
  c.chunk = index;
  c.bytes_per_rank = bytes;
  return c;
}

LayoutStats figures(std::int64_t params, std::int64_t padding, std::int64_t sent) {
  LayoutStats s;
  s.param_elements = params;
  s.padding = padding;
  s.traffic.sent_bytes = sent;
  s.traffic.reduce_scatter_bytes = sent;
  s.bytes_per_rank = {.params = 1, .grads = 1, .optimizer = 1};  // replaced by job.json's
  return s;
}

/// pp 2 x vpp 2: stage 0 holds 100 + 40 bytes per rank, stage 1 holds 70 + 90.
JobRecord two_stages() {
  JobRecord r;
  r.parallel.pp = 2;
  r.parallel.vpp = 2;
  r.chunks = {chunk(0, 0, {.params = 10, .grads = 20, .optimizer = 70}),
              chunk(0, 1, {.params = 5, .grads = 10, .optimizer = 25}),
              chunk(1, 0, {.params = 7, .grads = 14, .optimizer = 49}),
              chunk(1, 1, {.params = 9, .grads = 18, .optimizer = 63})};
  r.heaviest_stage = 1;
  return r;
}

}  // namespace

TEST_SUITE("job stats") {
  TEST_CASE("stages are their chunks added up; bytes per rank are job.json's") {
    const JobRecord r = two_stages();
    const JobStats s = expect_ok(job_stats(
        r, {figures(300, 100, 8), figures(100, 0, 4), figures(50, 50, 6), figures(50, 0, 6)}));
    REQUIRE(s.stages.size() == 2);
    CHECK(s.stages[0].bytes_per_rank == BytesPerRank{.params = 15, .grads = 30, .optimizer = 95});
    CHECK(s.stages[1].bytes_per_rank == BytesPerRank{.params = 16, .grads = 32, .optimizer = 112});
    CHECK(s.chunks[2].bytes_per_rank == r.chunks[2].bytes_per_rank);
    CHECK(s.stages[0].param_elements == 400);
    CHECK(s.stages[0].padding == 100);
    CHECK(s.stages[0].padding_percent() == doctest::Approx(20.0));  // 100 of 500
    CHECK(s.stages[1].padding_percent() == doctest::Approx(50.0 / 150 * 100));
    CHECK(s.stages[0].traffic.sent_bytes == 12);
    CHECK(s.stages[1].traffic.sent_bytes == 12);
    CHECK(s.busiest_stage == 0);  // the first of equals
    CHECK(s.heaviest_stage == 1);
    CHECK(s.param_elements == 500);  // 300 + 100 + 50 + 50
    CHECK(s.padding == 150);
  }

  TEST_CASE("a job whose figures do not fit is refused") {
    JobRecord r = two_stages();
    CHECK_FALSE(job_stats(r, {figures(1, 0, 0)}));  // 1 chunk's figures for 4 chunks
    r.heaviest_stage = 2;
    const auto four = std::vector<LayoutStats>(4, figures(1, 0, 0));
    CHECK_FALSE(job_stats(r, four));
    r.heaviest_stage = 0;
    r.chunks[1].bytes_per_rank.optimizer = std::numeric_limits<std::int64_t>::max();
    const Result<JobStats> overflow = job_stats(r, four);
    REQUIRE_FALSE(overflow);
    CHECK(overflow.error().message == "stage 0: its bytes per rank do not fit in 64 bits");
  }

  TEST_CASE("what a chunk builds") {
    JobRecordChunk c;
    c.layers = {0, 1, 2};
    c.embedding = true;
    CHECK(describe_chunk(c) == "E 0-2");
    c.stage = 3;  // word embeddings for multi-token prediction: no embedding layer
    c.layers = {59, 60};
    c.mtp_layers = {0};
    c.output = true;
    CHECK(describe_chunk(c) == "59-60 mtp 0 L");
    c.layers = {7};
    c.mtp_layers = {0, 1};
    c.output = false;
    CHECK(describe_chunk(c) == "7 mtp 0-1");
    CHECK(describe_chunk(JobRecordChunk{}) == "-");
  }

  TEST_CASE("the JSON: each chunk's place, then its stats object") {
    const JobRecord r = two_stages();
    const JobStats s = expect_ok(job_stats(r, std::vector<LayoutStats>(4, figures(10, 0, 2))));
    const std::string json = job_stats_to_json(r, s);
    const std::string first = stats_to_json(s.chunks[0]);
    CHECK(json.find(R"({"stage": 0, "chunk": 0, "builds": "-", )" + first.substr(1)) !=
          std::string::npos);
    std::size_t at = 0;
    for (const char* key : {"\"model\"", "\"chunks\"", "\"stages\"",
                            "\"heaviest_stage\": "
                            "{\"stage\": 1",
                            "\"busiest_stage\"", "\"totals\""}) {
      const std::size_t found = json.find(key, at);
      CHECK_MESSAGE(found != std::string::npos, key);
      at = found == std::string::npos ? at : found;
    }
  }
}
