// The one path from a chunk to a layout: manifests made in memory are the manifests their
// text reads back to, plan_chunk is plan then layout_stats, a job's chunks are planned with
// the options its rules give, and the far-off advice planned only as far as it needs is the
// advice of every alternative planned.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "paramlayout/alternatives.hpp"
#include "paramlayout/job.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/plan.hpp"
#include "paramlayout/plan_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;

namespace {

void check_same_params(const Manifest& a, const Manifest& b) {
  REQUIRE(a.params.size() == b.params.size());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const Param& p = a.params[i];
    const Param& q = b.params[i];
    CHECK(p.name == q.name);
    CHECK(p.shape == q.shape);
    CHECK(p.numel == q.numel);
    CHECK(p.dtype == q.dtype);
    CHECK(p.storage == q.storage);
    CHECK(p.expert_parallel == q.expert_parallel);
    CHECK(p.shared_embedding == q.shared_embedding);
    CHECK(p.embedding_or_output == q.embedding_or_output);
    CHECK(p.use_muon == q.use_muon);
    CHECK(p.gtp_remat_size == q.gtp_remat_size);
  }
}

/// The advice as it was defined: every alternative planned and weighed, then the rule.
struct Brute {
  bool far = false;
  std::optional<std::string> better;  ///< the best layerwise alternative's options
  std::int64_t better_bytes = 0;
  std::int64_t sequential_bytes = 0;
};

Brute brute_advice(const Manifest& m, const Layout& l, const LayoutStats& s) {
  Brute out;
  const PlanOptions& o = l.options;
  const std::int64_t bytes = s.bytes_per_rank.total();
  const Packer other = o.packer == Packer::megatron ? Packer::balanced : Packer::megatron;
  std::int64_t best = bytes;
  for (const auto& [packer, one_bucket] :
       {std::pair{other, false}, std::pair{o.packer, true}, std::pair{other, true}}) {
    PlanOptions t = o;
    t.packer = packer;
    if (one_bucket) t.bucket_size.reset();
    if (t == o) continue;
    const ChunkPlan a = expect_ok(plan_chunk(m, t));
    if (a.stats.bytes_per_rank.total() < best) {
      best = a.stats.bytes_per_rank.total();
      out.better =
          std::string(packer != o.packer ? "--packer " + std::string(to_string(packer)) : "") +
          (packer != o.packer && t.bucket_size != o.bucket_size ? " " : "") +
          (t.bucket_size != o.bucket_size ? "--bucket-size none" : "");
      out.better_bytes = best;
    }
  }
  PlanOptions sequential = o;
  sequential.strategy = Strategy::sequential_dp;
  sequential.packer = Packer::megatron;
  out.sequential_bytes = expect_ok(plan_chunk(m, sequential)).stats.bytes_per_rank.total();
  best = std::min(best, out.sequential_bytes);
  out.far =
      s.padding_percent() >= 25 && static_cast<double>(bytes) >= 1.25 * static_cast<double>(best);
  return out;
}

}  // namespace

TEST_SUITE("chunk seam") {
  TEST_CASE("a manifest's text reads back to the manifest, every optional member kept") {
    const std::string text =
        "{\"schema\": \"paramlayout.manifest/v1\", \"model\": \"m\",\n"
        " \"parallel\": {\"tp\": 2, \"pp\": 4, \"vpp\": 2, \"cp\": 1, \"ep\": 8, \"etp\": 1, "
        "\"stage\": 3, \"chunk\": 1},\n"
        " \"params\": [\n"
        "  {\"name\": \"a\", \"shape\": [4, 8], \"dtype\": \"bfloat16\", \"storage\": \"fp8\", "
        "\"expert_parallel\": true, \"embedding_or_output\": true, \"shared_embedding\": true, "
        "\"use_muon\": false, \"gtp_remat_size\": 2},\n"
        "  {\"name\": \"b\", \"shape\": [], \"dtype\": \"float32\"}\n"
        "]}\n";
    const Manifest m = expect_ok(parse_manifest(text, "m.json"));
    CHECK(write_manifest_json(m) == text);
    const Manifest bare = expect_ok(
        parse_manifest(R"({"schema": "paramlayout.manifest/v1", "params": []})", "bare.json"));
    CHECK(write_manifest_json(bare) ==
          "{\"schema\": \"paramlayout.manifest/v1\",\n \"params\": [\n]}\n");
  }

  TEST_CASE("a job's manifests, made in memory, are what their text reads back to") {
    const JobSpec spec = expect_ok(job_from_megatron_args(
        {"--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size",
         "1000", "--max-position-embeddings", "128", "--pipeline-model-parallel-size", "2",
         "--num-layers-per-virtual-pipeline-stage", "2", "--bf16", "--use-distributed-optimizer",
         "--overlap-grad-reduce"},
        8, nullptr));
    const JobPlan plan = expect_ok(plan_job(spec));
    REQUIRE(plan.chunks.size() == 4);
    for (const JobChunk& c : plan.chunks) {
      CAPTURE(c.manifest.source);
      CHECK(c.manifest.source == chunk_file_stem(c.placement) + ".manifest.json");
      const std::string text = write_manifest_json(c.manifest);
      const Manifest read = expect_ok(parse_manifest(text, c.manifest.source));
      CHECK(read.sha256 == c.manifest.sha256);
      CHECK(read.model == c.manifest.model);
      CHECK(read.parallel == c.manifest.parallel);
      check_same_params(read, c.manifest);
      // Planned from its text as `plan` plans it, the chunk gets the job's layout.
      const ChunkPlan again = expect_ok(plan_chunk(read, c.layout.options));
      CHECK(again.layout.buffers.size() == c.layout.buffers.size());
      CHECK(again.stats.bytes_per_rank.total() == c.stats.bytes_per_rank.total());
      CHECK(again.layout.manifest_sha256 == c.layout.manifest_sha256);
    }
  }

  TEST_CASE("a job's plan options: only the first chunk of the first stage is bucketed") {
    // 8 GPUs, pp 2, cp 2: dp 2, dp x cp 4; training's rule gives max(40M, 4M) = 40M.
    const JobSpec spec = expect_ok(job_from_megatron_args(
        {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size",
         "1000", "--max-position-embeddings", "128", "--pipeline-model-parallel-size", "2",
         "--context-parallel-size", "2", "--bf16", "--use-distributed-optimizer",
         "--overlap-grad-reduce"},
        8, nullptr));
    ChunkPlacement first;
    ChunkPlacement second;
    second.stage = 1;
    const PlanOptions o = job_plan_options(spec, first, 1000);
    CHECK(o.dp == 4);  // dense buffers are sharded over dp x cp
    CHECK(o.bucket_size == 40'000'000);
    CHECK(o.strategy == Strategy::sequential_dp);
    CHECK_FALSE(job_plan_options(spec, second, 1000).bucket_size);
    CHECK(training_bucket_size(64) == 64'000'000);
    CHECK(ddp_fallback_bucket_size(39) == 40'000'000);
  }

  TEST_CASE("bytes per rank: Adam keeps 12 bytes per element, Muon 8; totals fit or are refused") {
    BufferKey adam;
    BufferKey muon;
    muon.layerwise = true;
    CHECK(optimizer_state(adam).bytes_per_element() == 4 + 2 * 4);  // fp32 main, 2 moments
    CHECK(optimizer_state(muon).bytes_per_element() == 4 + 4);      // fp32 main, momentum
    // A layerwise buffer of 1024 bf16 elements over 4 shards: whole param and grad buffers,
    // a quarter of the optimizer state.
    BufferLayout b;
    b.key = muon;
    b.key.param_dtype = b.key.grad_dtype = DType::bfloat16;
    b.strategy = Strategy::layerwise;
    b.num_shards = 4;
    b.numel = 1024;
    const BytesPerRank bytes = *buffer_bytes_per_rank(b);
    CHECK(bytes.params == 2048);
    CHECK(bytes.grads == 2048);
    CHECK(bytes.optimizer == 256 * 8);
    CHECK(bytes.total() == 2048 + 2048 + 2048);
    const std::int64_t half = std::numeric_limits<std::int64_t>::max() / 2 + 1;
    BytesPerRank huge{half, 0, 0};
    CHECK_FALSE(huge.add(huge));  // 2 x half passes 2^63 - 1
    CHECK(huge.params == half);   // left as it was
    CHECK(BytesPerRank{half, half, 0}.total() == std::numeric_limits<std::int64_t>::max());
  }

  TEST_CASE("the advice, planned only as far as it needs, is that of every alternative") {
    std::vector<std::string> manifests = {"gpt2-124m.json", "llama3-8b.json",
                                          "mixtral-8x7b-tp2-ep8.json"};
    for (int i = 1000; i < 1012; ++i) manifests.push_back(fmt::format("random-{}.json", i));
    std::vector<Manifest> cases;
    for (const std::string& name : manifests) {
      const std::string path = source_path("testdata/reference/manifests/" + name);
      cases.push_back(expect_ok(parse_manifest(read_text(path), path)));
    }
    // k equal matrices over 4 ranks: each shard holds whole ones, so 3 of them pad 25% (the
    // floor), which sequential-dp beats by less than 1.25 times.
    for (int k = 1; k <= 9; ++k) {
      std::string params;
      for (int i = 0; i < k; ++i) {
        params += fmt::format(R"({}{{"name": "w{}", "shape": [64, 64], "dtype": "bfloat16"}})",
                              i > 0 ? ", " : "", i);
      }
      cases.push_back(expect_ok(parse_manifest(
          R"({"schema": "paramlayout.manifest/v1", "params": [)" + params + "]}", "k.json")));
    }
    int far = 0;
    int planned = 0;
    for (const Manifest& m : cases) {
      const std::string& name = m.source;
      for (const std::int64_t dp : {4, 16, 64, 512}) {
        for (const Packer packer : {Packer::megatron, Packer::balanced}) {
          for (const bool buckets : {true, false}) {
            CAPTURE(name);
            CAPTURE(dp);
            CAPTURE(to_string(packer));
            CAPTURE(buckets);
            PlanOptions o;
            o.strategy = Strategy::layerwise;
            o.dp = o.expert_dp = dp;
            o.packer = packer;
            if (buckets) o.bucket_size = 1'000'000;
            const ChunkPlan p = expect_ok(plan_chunk(m, o));
            const std::optional<PaddingAdvice> advice = padding_advice(m, p.layout, p.stats);
            if (p.stats.padding_percent() < 25) {
              CHECK_FALSE(advice);
              continue;
            }
            ++planned;
            const Brute brute = brute_advice(m, p.layout, p.stats);
            REQUIRE(advice.has_value() == brute.far);
            if (!advice) continue;
            ++far;
            REQUIRE(advice->sequential_dp);
            CHECK(advice->sequential_dp->footprint.bytes_per_rank.total() ==
                  brute.sequential_bytes);
            REQUIRE(advice->better_layerwise.has_value() == brute.better.has_value());
            if (brute.better) {
              CHECK(advice->better_layerwise->options == *brute.better);
              CHECK(advice->better_layerwise->footprint.bytes_per_rank.total() ==
                    brute.better_bytes);
            }
          }
        }
      }
    }
    // The cases reach both sides of the rule.
    CHECK(far > 0);
    CHECK(planned > far);
  }
}
