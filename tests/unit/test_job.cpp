// job: whole jobs of real models: the layers each chunk builds as Megatron-LM's split
// functions compute them, memory figures worked out by hand, every chunk's layout keeping its
// promises, and the chunks adding up to the model.
#include <doctest/doctest.h>

#include <numeric>

#include "paramlayout/check.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/model_chunk.hpp"
#include "paramlayout/plan_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;
using paramlayout::test::operator+;
using paramlayout::test::job_error;

namespace {

Args small_model(std::int64_t layers = 4) { return test::small_job_args(layers); }

JobSpec job(const Args& args, std::int64_t world, const HfModel* hf = nullptr) {
  return test::job_spec(args, world, hf);
}

HfModel hf_config(const std::string& name) { return test::hf_model(name); }

/// The layers of each chunk, stage-major.
std::vector<std::vector<std::int64_t>> layers_of(const JobPlan& plan) {
  std::vector<std::vector<std::int64_t>> out;
  for (const JobChunk& c : plan.chunks) out.push_back(c.placement.layers);
  return out;
}

std::vector<std::int64_t> iota(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  std::iota(out.begin(), out.end(), first);
  return out;
}

/// Every chunk's layout keeps its promises and is what a fresh plan gives.
void check_every_chunk(const JobPlan& plan) {
  for (const JobChunk& c : plan.chunks) {
    CAPTURE(c.placement.stage);
    CAPTURE(c.placement.chunk);
    CHECK(check_layout(c.layout, c.manifest).empty());
    CHECK(compare_with_replan(c.layout, c.manifest).empty());
  }
}

const JobChunk& chunk(const JobPlan& plan, std::int64_t stage, std::int64_t index) {
  for (const JobChunk& c : plan.chunks) {
    if (c.placement.stage == stage && c.placement.chunk == index) return c;
  }
  FAIL("no chunk");
  return plan.chunks.front();
}

}  // namespace

TEST_SUITE("job") {
  TEST_CASE("Gemma 4 dense: the vocab padded as Bridge pads it, one pipeline stage only") {
    // Megatron-Bridge's dense provider pads by --make-vocab-size-divisible-by whatever the line
    // says, and builds one stage: 262,144 rows stay, 262,144 / 2 per rank at tp 2.
    const HfModel e2b = hf_config("gemma-4-e2b");
    const JobSpec j = job({"--no-pad-vocab-size", "--tensor-model-parallel-size", "2"}, 2, &e2b);
    CHECK(j.model.make_vocab_size_divisible_by == 128);
    const JobSpec gpt = job(small_model() + Args{"--no-pad-vocab-size"}, 1);
    CHECK(gpt.model.make_vocab_size_divisible_by == 1);
    const JobSpec staged = job({"--pipeline-model-parallel-size", "5"}, 5, &e2b);
    Result<JobPlan> plan = plan_job(staged);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().message ==
          "the model cannot be split: Megatron-Bridge's Gemma 4 dense provider builds one "
          "pipeline stage only (Gemma4DenseProvider.provide: \"currently supports PP=1 only\")");
  }

  TEST_CASE("DeepSeek-V3 on 1,024 GPUs: a 32-stage layout, MTP, EP 64, VPP 2") {
    const HfModel ds = hf_config("deepseek-v3");
    const JobSpec j =
        job({"--pipeline-model-parallel-size", "16", "--expert-model-parallel-size", "64",
             "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L", "--mtp-num-layers", "1",
             "--bf16", "--use-distributed-optimizer", "--moe-grouped-gemm"},
            1024, &ds);
    CHECK(j.parallel.vpp == 2);
    CHECK(j.expert_dp == 1);  // 1024 / (etp 1 x ep 64 x pp 16)
    const JobPlan plan = expect_ok(plan_job(j));
    REQUIRE(plan.chunks.size() == 32);
    // Megatron-LM's layout: stage index s = vp x 16 + pp; "Ettt", then 29 stages of two
    // decoder layers, "m", "L".
    for (std::int64_t s = 0; s < 32; ++s) {
      const JobChunk& c = chunk(plan, s % 16, s / 16);
      CAPTURE(s);
      if (s == 0) CHECK(c.placement.layers == iota(0, 3));
      if (s >= 1 && s <= 29) CHECK(c.placement.layers == iota(3 + 2 * (s - 1), 2));
      if (s >= 30) CHECK(c.placement.layers.empty());
      CHECK(c.placement.mtp_layers == (s == 30 ? iota(0, 1) : iota(0, 0)));
      CHECK(c.placement.pre_process == (s == 0));
      CHECK(c.placement.post_process == (s == 31));
    }
    // By hand, a chunk of two MoE layers (stage 0, chunk 1: layers 33 and 34). Per layer:
    // MLA = input norm 7168 + linear_proj 7168 x 128 x 128 + q_down 1536 x 7168 + q_up norm
    // 1536 + q_up 128 x 192 x 1536 + kv_down 576 x 7168 + kv_up norm 512 + kv_up
    // 128 x 256 x 512; MoE dense part = pre-MLP norm 7168 + router 256 x 7168 + shared
    // expert 3 x 2048 x 7168; each of its 256 / 64 = 4 experts 3 x 2048 x 7168.
    const std::int64_t mla = 7168 + 7168 * 128 * 128 + 1536 * 7168 + 1536 + 128 * 192 * 1536 +
                             576 * 7168 + 512 + 128 * 256 * 512;
    const std::int64_t dense = 2 * (mla + 7168 + 256 * 7168 + 3 * 2048 * 7168);
    const std::int64_t experts = 2 * 4 * 3 * 2048 * 7168;
    const JobChunk& middle = chunk(plan, 0, 1);
    CHECK(middle.param_elements == dense + experts);
    // Every size is a multiple of 64 and each buffer of 128: no padding. Dense state is
    // sharded over dp 64, the experts' over expert dp 1; 12 bytes an element (Adam).
    CHECK(middle.stats.bytes_per_rank.optimizer == doctest::Approx(dense / 64 * 12 + experts * 12));
    CHECK(middle.stats.bytes_per_rank.params == doctest::Approx(2.0 * (dense + experts)));
    CHECK(middle.stats.bytes_per_rank.grads == doctest::Approx(4.0 * (dense + experts)));
    check_every_chunk(plan);
  }

  TEST_CASE("stages that repeat share one plan, each under its own names, as if planned alone") {
    const Args line = small_model(8) + Args{"--pipeline-model-parallel-size", "4",
                                            "--use-distributed-optimizer", "--bf16"};
    const JobSpec spec = job(line, 16);
    const JobPlan plan = expect_ok(plan_job(spec));
    const JobChunk& second = chunk(plan, 1, 0);
    const JobChunk& third = chunk(plan, 2, 0);
    REQUIRE(same_but_names(second.manifest, third.manifest));
    for (const JobChunk& c : plan.chunks) {
      CAPTURE(c.placement.stage);
      const ChunkPlan alone = expect_ok(plan_chunk(c.manifest, c.layout.options));
      CHECK(c.layout.buffers == alone.layout.buffers);
      CHECK(c.layout.manifest_sha256 == c.manifest.sha256);
      CHECK(c.layout_stats.bytes_per_rank == alone.stats.bytes_per_rank);
      CHECK(check_layout(c.layout, c.manifest).empty());
    }
    // Planned for its figures alone: the same figures, no manifest hashed.
    const JobPlan figures = expect_ok(plan_job(spec, JobPlanUse::figures));
    REQUIRE(figures.chunks.size() == plan.chunks.size());
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
      CHECK(figures.chunks[i].stats.bytes_per_rank == plan.chunks[i].stats.bytes_per_rank);
      CHECK(figures.chunks[i].manifest.sha256.empty());
    }
    // Under other names: each slot takes its param's new name.
    Manifest renamed = third.manifest;
    renamed.names = std::make_shared<NameStore>();
    for (Param& p : renamed.params) p.name = renamed.names->add("renamed." + std::string(p.name));
    REQUIRE(same_but_names(second.manifest, renamed));
    const ChunkPlan relabelled =
        relabel_plan(ChunkPlan{second.layout, second.layout_stats}, second.manifest, renamed);
    const ChunkPlan alone = expect_ok(plan_chunk(renamed, second.layout.options));
    CHECK(relabelled.layout.buffers == alone.layout.buffers);
    CHECK(relabelled.stats.buffers.front().largest_param ==
          alone.stats.buffers.front().largest_param);
    CHECK(check_layout(relabelled.layout, renamed).empty());
    // A param whose flags differ is not the same chunk.
    Manifest other = third.manifest;
    other.params.back().use_muon = !other.params.back().use_muon;
    CHECK_FALSE(same_but_names(second.manifest, other));
  }

  TEST_CASE("DeepSeek-V3's expert state: 58.6 GiB per rank with ep 64 on 128 GPUs") {
    const HfModel ds = hf_config("deepseek-v3");
    const JobPlan plan =
        expect_ok(plan_job(job({"--expert-model-parallel-size", "64", "--bf16",
                                "--use-distributed-optimizer", "--moe-grouped-gemm"},
                               128, &ds)));
    // Expert dp = 128 / 64 = 2. Experts per rank: 58 MoE layers x 4 x 3 x 2048 x 7168; the
    // rest (the published 671,026,419,200 less all 256 experts, plus the vocab padding
    // 0 rows: 129280 is a multiple of 128) over dp 128.
    const double experts = 58.0 * 4 * 3 * 2048 * 7168;
    const double dense = 671'026'419'200.0 - 58.0 * 256 * 3 * 2048 * 7168;
    const double expected = experts / 2 * 12 + dense / 128 * 12;
    CHECK(plan.chunks[0].stats.bytes_per_rank.optimizer == doctest::Approx(expected).epsilon(1e-6));
    CHECK(expected / (1 << 30) == doctest::Approx(58.6).epsilon(0.001));
  }

  TEST_CASE("Llama-3.1-405B: PP 16 x VPP 2 with the embedding and loss counted as layers") {
    const Args llama = {"--num-layers",
                        "126",
                        "--hidden-size",
                        "16384",
                        "--ffn-hidden-size",
                        "53248",
                        "--num-attention-heads",
                        "128",
                        "--group-query-attention",
                        "--num-query-groups",
                        "8",
                        "--swiglu",
                        "--normalization",
                        "RMSNorm",
                        "--disable-bias-linear",
                        "--position-embedding-type",
                        "rope",
                        "--untie-embeddings-and-output-weights",
                        "--vocab-size",
                        "128256",
                        "--tensor-model-parallel-size",
                        "8",
                        "--pipeline-model-parallel-size",
                        "16",
                        "--num-virtual-stages-per-pipeline-rank",
                        "2",
                        "--account-for-embedding-in-pipeline-split",
                        "--account-for-loss-in-pipeline-split",
                        "--bf16",
                        "--use-distributed-optimizer"};
    const JobPlan plan = expect_ok(plan_job(job(llama, 2048)));
    // (126 + 2) / 16 = 8 per stage, 4 per chunk; offset = v x 64 + pp x 4 - 1 but for the
    // first chunk; the first and last chunks give one slot to the embedding and the loss.
    for (std::int64_t pp = 0; pp < 16; ++pp) {
      for (std::int64_t v = 0; v < 2; ++v) {
        CAPTURE(pp);
        CAPTURE(v);
        const bool first = pp == 0 && v == 0;
        const bool last = pp == 15 && v == 1;
        const std::int64_t offset = v * 64 + pp * 4 - (first ? 0 : 1);
        CHECK(chunk(plan, pp, v).placement.layers == iota(offset, first || last ? 3 : 4));
      }
    }
    // By hand, a middle chunk of 4 layers at tp 8: linear_proj 16384 x 2048, qkv norm 16384,
    // qkv (128 + 2 x 8) x 128 / 8 rows, fc1 norm 16384, fc1 2 x 53248 / 8 rows, fc2 16384 x
    // 6656. bf16 params, float32 grads, Adam state over dp 2048 / (8 x 16) = 16.
    const std::int64_t layer =
        16384 * 2048 + 16384 + 2304 * 16384 + 16384 + 13312 * 16384 + 16384 * 6656;
    const JobChunk& c = chunk(plan, 1, 0);
    CHECK(c.param_elements == 4 * layer);
    CHECK(c.stats.bytes_per_rank.params == doctest::Approx(2.0 * 4 * layer));
    CHECK(c.stats.bytes_per_rank.grads == doctest::Approx(4.0 * 4 * layer));
    CHECK(c.stats.bytes_per_rank.optimizer == doctest::Approx(4.0 * layer / 16 * 12));
    check_every_chunk(plan);
  }

  TEST_CASE("Mixtral 8x22B: EP 8 over 4 stages, experts sharded over their own dp") {
    const Args mixtral = {"--num-layers",
                          "56",
                          "--hidden-size",
                          "6144",
                          "--ffn-hidden-size",
                          "16384",
                          "--num-attention-heads",
                          "48",
                          "--group-query-attention",
                          "--num-query-groups",
                          "8",
                          "--swiglu",
                          "--normalization",
                          "RMSNorm",
                          "--disable-bias-linear",
                          "--position-embedding-type",
                          "rope",
                          "--untie-embeddings-and-output-weights",
                          "--vocab-size",
                          "32768",
                          "--num-experts",
                          "8",
                          "--moe-grouped-gemm",
                          "--tensor-model-parallel-size",
                          "2",
                          "--pipeline-model-parallel-size",
                          "4",
                          "--expert-model-parallel-size",
                          "8",
                          "--expert-tensor-parallel-size",
                          "1",
                          "--bf16",
                          "--use-distributed-optimizer"};
    const JobSpec j = job(mixtral, 256);
    CHECK(j.dp == 32);
    CHECK(j.expert_dp == 8);  // 256 / (etp 1 x ep 8 x pp 4)
    const JobPlan plan = expect_ok(plan_job(j));
    for (std::int64_t s = 0; s < 4; ++s)
      CHECK(chunk(plan, s, 0).placement.layers == iota(14 * s, 14));
    // By hand: each stage holds 14 layers of one expert: fc1 2 x 16384 x 6144 and fc2
    // 6144 x 16384, 12 bytes of Adam state an element over expert dp 8.
    const std::int64_t experts = 14 * 3 * std::int64_t{16384} * 6144;
    const BufferLayout* expert_buffer = nullptr;
    for (const BufferLayout& b : chunk(plan, 1, 0).layout.buffers) {
      if (b.key.expert_parallel) expert_buffer = &b;
    }
    REQUIRE(expert_buffer != nullptr);
    CHECK(expert_buffer->param_numel() == experts);
    CHECK(expert_buffer->num_shards == 8);
    CHECK(chunk(plan, 1, 0).stats.buffers[1].bytes_per_rank.optimizer ==
          doctest::Approx(static_cast<double>(experts) / 8 * 12));
    check_every_chunk(plan);
  }

  TEST_CASE("Qwen3-235B-A22B: uneven first and last stages, EP 16") {
    const Args qwen = {"--num-layers",
                       "94",
                       "--hidden-size",
                       "4096",
                       "--ffn-hidden-size",
                       "12288",
                       "--num-attention-heads",
                       "64",
                       "--group-query-attention",
                       "--num-query-groups",
                       "4",
                       "--kv-channels",
                       "128",
                       "--qk-layernorm",
                       "--swiglu",
                       "--normalization",
                       "RMSNorm",
                       "--disable-bias-linear",
                       "--position-embedding-type",
                       "rope",
                       "--untie-embeddings-and-output-weights",
                       "--vocab-size",
                       "151936",
                       "--num-experts",
                       "128",
                       "--moe-ffn-hidden-size",
                       "1536",
                       "--moe-grouped-gemm",
                       "--tensor-model-parallel-size",
                       "4",
                       "--pipeline-model-parallel-size",
                       "8",
                       "--decoder-first-pipeline-num-layers",
                       "10",
                       "--decoder-last-pipeline-num-layers",
                       "12",
                       "--expert-model-parallel-size",
                       "16",
                       "--expert-tensor-parallel-size",
                       "1",
                       "--bf16",
                       "--use-distributed-optimizer"};
    const JobSpec j = job(qwen, 512);
    CHECK(j.expert_dp == 4);  // 512 / (1 x 16 x 8)
    const JobPlan plan = expect_ok(plan_job(j));
    // (94 - 10 - 12) / 6 = 12 layers on each middle stage.
    CHECK(layers_of(plan) == std::vector<std::vector<std::int64_t>>{
                                 iota(0, 10), iota(10, 12), iota(22, 12), iota(34, 12),
                                 iota(46, 12), iota(58, 12), iota(70, 12), iota(82, 12)});
    // By hand: a middle stage's experts: 12 layers x 128 / 16 = 8 experts x 3 x 1536 x 4096,
    // Adam state over expert dp 4.
    const double experts = 12.0 * 8 * 3 * 1536 * 4096;
    CHECK(chunk(plan, 3, 0).stats.buffers[1].bytes_per_rank.optimizer ==
          doctest::Approx(experts / 4 * 12));
    check_every_chunk(plan);
  }

  TEST_CASE("a job's chunks add up to the model") {
    for (const char* config : {"llama3-8b", "qwen3-30b-a3b", "gpt2"}) {
      CAPTURE(config);
      const HfModel hf = hf_config(config);
      const ModelChunk whole = build_chunk(
          hf.spec, {},
          ChunkPlacement{0, 0, iota(0, hf.spec.num_layers()), {}, true, true, true, false});
      const JobPlan plan = expect_ok(plan_job(
          job({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
               "--use-distributed-optimizer"},
              8, &hf)));
      std::int64_t sum = 0;
      for (const JobChunk& c : plan.chunks) {
        sum += c.param_elements;
        for (const Param& p : c.manifest.params) {
          // A tied output layer is a second copy of the embedding on the last stage.
          if (p.shared_embedding && !c.placement.pre_process) sum -= p.numel;
        }
      }
      CHECK(sum == whole.numel());
      check_every_chunk(plan);
    }
  }
}
