// job: Megatron-LM's arguments read as Megatron-LM reads them (defaults, derived sizes,
// refusals), and whole jobs of real models: the layers each chunk builds as Megatron-LM's
// split functions compute them, memory figures worked out by hand, every chunk's layout
// keeping its promises, and the chunks adding up to the model.
#include <doctest/doctest.h>

#include <numeric>

#include "paramlayout/check.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/model_chunk.hpp"
#include "paramlayout/plan_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;
using paramlayout::test::Args;
using paramlayout::test::operator+;

namespace {

/// A small GPT described by Megatron-LM's model arguments.
Args small_model(std::int64_t layers = 4) {
  return test::small_gpt_args(layers) + Args{"--vocab-size", "1000"};
}

JobSpec job(const Args& args, std::int64_t world, const HfModel* hf = nullptr) {
  return expect_ok(job_from_megatron_args(args, world, hf));
}

/// The error reading or planning the job gives.
std::string job_error(const Args& args, std::int64_t world) {
  Result<JobSpec> spec = job_from_megatron_args(args, world, nullptr);
  if (!spec) return spec.error().message;
  Result<JobPlan> plan = plan_job(*spec);
  REQUIRE_FALSE(plan);
  return plan.error().message;
}

HfModel hf_config(const std::string& name) {
  const std::string path = source_path("testdata/configs/" + name + ".json");
  return expect_ok(read_hf_config(read_text(path), path));
}

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
  TEST_CASE("arguments are read as argparse reads them") {
    const JobSpec j = job(small_model() + Args{"--tensor-model-parallel-size=2", "--lr", "1e-4",
                                              "--data-path", "a", "b", "--bf16",
                                              "--tensor-model-parallel-size", "4"},
                          8);
    CHECK(j.parallel.tp == 4);  // the last occurrence wins
    CHECK(j.dp == 2);
    CHECK(j.ignored_arguments == Args{"--lr 1e-4", "--data-path a b"});
    CHECK(job_error(Args{"stray"} + small_model(), 1).find("'stray' (a value no argument "
                                                           "takes)") != std::string::npos);
    CHECK(job_error(small_model() + Args{"--bf16", "yes"}, 1) ==
          "Megatron-LM's argument parser does not know this argument: 'yes' (a value no "
          "argument takes: --bf16 takes none)");
    CHECK(job_error(small_model() + Args{"--tensor-model-parallel-size", "two"}, 2) ==
          "--tensor-model-parallel-size: invalid int value: 'two' (Megatron-LM's argument "
          "parser refuses it)");
    CHECK(job_error(small_model() + Args{"--tensor-model-parallel-size", "0"}, 2) ==
          "--tensor-model-parallel-size: expected an integer in [1, 1048576], got '0'");
  }

  TEST_CASE("Megatron-LM's defaults: learned positions, LayerNorm, biases, tied embeddings") {
    const JobSpec j = job(small_model(), 1);
    CHECK(j.model.position_embedding == PositionEmbedding::learned_absolute);
    CHECK(j.model.normalization == Normalization::layer_norm);
    CHECK(j.model.add_bias_linear);
    CHECK_FALSE(j.model.untie_embeddings_and_output_weights);
    CHECK(j.model.ffn_hidden_size == 256);  // 4 x hidden
    CHECK(job(small_model() + Args{"--swiglu"}, 1).model.ffn_hidden_size == 128);  // 4h x 2/3, to 64
    CHECK(j.param_dtype == DType::float32);
    CHECK(j.strategy == Strategy::unpadded);
  }

  TEST_CASE("the world splits into dp = world / (tp pp cp) and expert dp = world / (etp ep pp)") {
    const Args moe = small_model() + Args{"--num-experts", "8", "--disable-bias-linear"};
    const JobSpec j = job(moe + Args{"--tensor-model-parallel-size", "2",
                                     "--pipeline-model-parallel-size", "2",
                                     "--context-parallel-size", "2",
                                     "--expert-model-parallel-size", "4",
                                     "--expert-tensor-parallel-size", "1",
                                     "--use-distributed-optimizer"},
                          64);
    CHECK(j.dp == 8);
    CHECK(j.expert_dp == 8);
    CHECK(j.dense_shards() == 16);  // dp x cp: context-parallel ranks share the dense grads
    CHECK(j.expert_shards() == 8);
    CHECK(job(moe + Args{"--expert-model-parallel-size", "4"}, 8).expert_dp == 2);
    CHECK(job_error(small_model() + Args{"--tensor-model-parallel-size", "4"}, 6) ==
          "--world-size: 6 is not divisible by tp x pp x cp = 4 x 1 x 1 = 4");
    CHECK(job_error(moe + Args{"--expert-model-parallel-size", "3"}, 6) ==
          "the model cannot be split (--tensor-model-parallel-size 1, "
          "--expert-model-parallel-size 3, --expert-tensor-parallel-size 1): ep 3 does not "
          "divide the 8 experts");
  }

  TEST_CASE("precision and optimizer: the grads' dtype, the strategy, the buckets") {
    const auto spec = [](const Args& extra) { return job(small_model() + extra, 2); };
    CHECK(spec({"--bf16"}).grad_reduce_in_fp32);
    CHECK_FALSE(spec({"--bf16", "--grad-reduce-in-bf16"}).grad_reduce_in_fp32);
    CHECK_FALSE(spec({"--fp16"}).grad_reduce_in_fp32);
    CHECK(spec({"--fp16", "--accumulate-allreduce-grads-in-fp32"}).grad_reduce_in_fp32);
    CHECK(spec({"--use-distributed-optimizer"}).strategy == Strategy::sequential_dp);
    CHECK(spec({"--optimizer", "muon", "--use-distributed-optimizer"}).strategy ==
          Strategy::layerwise);
    CHECK(spec({"--optimizer", "dist_muon"}).strategy == Strategy::layerwise);
    CHECK(spec({"--optimizer", "muon"}).strategy == Strategy::unpadded);

    const Args pipeline = {"--pipeline-model-parallel-size", "2",
                           "--num-virtual-stages-per-pipeline-rank", "2",
                           "--use-distributed-optimizer", "--overlap-grad-reduce"};
    const JobPlan plan = expect_ok(plan_job(job(small_model(8) + pipeline, 32)));
    // Only the first chunk of the first stage is bucketed, at max(40M, 1M x dp) for dp 16.
    std::vector<std::optional<std::int64_t>> sizes;
    for (const JobChunk& c : plan.chunks) sizes.push_back(c.layout.options.bucket_size);
    CHECK(sizes == std::vector<std::optional<std::int64_t>>{40'000'000, std::nullopt,
                                                            std::nullopt, std::nullopt});
    const JobPlan wide = expect_ok(plan_job(job(small_model(8) + pipeline, 256)));
    CHECK(wide.chunks[0].layout.options.bucket_size == 128'000'000);
    const JobPlan unbucketed = expect_ok(plan_job(job(small_model(), 2)));
    CHECK(unbucketed.chunks[0].layout.options.bucket_size == std::nullopt);
  }

  TEST_CASE("arguments that change the layout in ways not modelled are refused") {
    CHECK(job_error(small_model() + Args{"--transformer-impl", "inference_optimized"}, 1)
              .find("builds modules paramlayout does not model") != std::string::npos);
    CHECK(job_error(small_model() + Args{"--use-torch-fsdp2"}, 1) ==
          "--use-torch-fsdp2: PyTorch FSDP2 shards params itself, not in "
          "DistributedDataParallel's buffers");
    CHECK(job_error({"--num-layers", "2", "--hidden-size", "8", "--num-attention-heads", "2",
                     "--max-position-embeddings", "8"},
                    1)
              .find("--vocab-size: is required") == 0);
  }

  TEST_CASE("models Megatron-LM's model code refuses are refused") {
    // transformer_config.py:2612-2615: biases on MoE experts only at etp 1 (etp defaults to tp).
    const Args moe = small_model() + Args{"--num-experts", "4"};
    CHECK(job_error(moe + Args{"--tensor-model-parallel-size", "2"}, 2)
              .find("--expert-tensor-parallel-size: is 2: Megatron-LM builds biases on MoE "
                    "experts only at expert tensor parallel size 1") == 0);
    CHECK(job(moe + Args{"--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size",
                         "1"},
              2)
              .parallel.etp == 1);
    // moe/experts.py:205-207: TE's grouped experts with biases refuse bias-dropout fusion.
    CHECK(job_error(moe + Args{"--moe-grouped-gemm"}, 1).find("--moe-grouped-gemm: with biases") ==
          0);
    CHECK(job(moe + Args{"--moe-grouped-gemm", "--no-bias-dropout-fusion"}, 1).model.moe
              .grouped_gemm);
  }

  TEST_CASE("a model argument that disagrees with --hf-config is named") {
    const HfModel llama = hf_config("llama3-8b");
    CHECK(job({"--num-layers", "32", "--swiglu"}, 1, &llama).model.num_layers() == 32);
    Result<JobSpec> r = job_from_megatron_args({"--hidden-size", "8192"}, 1, &llama);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "--hidden-size: 8192 disagrees with the --hf-config model's "
                               "4096; drop one");
  }

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
    const JobSpec j = job({"--pipeline-model-parallel-size", "16",
                           "--expert-model-parallel-size", "64",
                           "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L",
                           "--mtp-num-layers", "1", "--bf16", "--use-distributed-optimizer",
                           "--moe-grouped-gemm"},
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
    const JobPlan plan = expect_ok(plan_job(
        job({"--expert-model-parallel-size", "64", "--bf16", "--use-distributed-optimizer",
             "--moe-grouped-gemm"},
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
    const Args llama = {"--num-layers", "126", "--hidden-size", "16384", "--ffn-hidden-size",
                        "53248", "--num-attention-heads", "128", "--group-query-attention",
                        "--num-query-groups", "8", "--swiglu", "--normalization", "RMSNorm",
                        "--disable-bias-linear", "--position-embedding-type", "rope",
                        "--untie-embeddings-and-output-weights", "--vocab-size", "128256",
                        "--tensor-model-parallel-size", "8",
                        "--pipeline-model-parallel-size", "16",
                        "--num-virtual-stages-per-pipeline-rank", "2",
                        "--account-for-embedding-in-pipeline-split",
                        "--account-for-loss-in-pipeline-split", "--bf16",
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
    const std::int64_t layer = 16384 * 2048 + 16384 + 2304 * 16384 + 16384 + 13312 * 16384 +
                               16384 * 6656;
    const JobChunk& c = chunk(plan, 1, 0);
    CHECK(c.param_elements == 4 * layer);
    CHECK(c.stats.bytes_per_rank.params == doctest::Approx(2.0 * 4 * layer));
    CHECK(c.stats.bytes_per_rank.grads == doctest::Approx(4.0 * 4 * layer));
    CHECK(c.stats.bytes_per_rank.optimizer == doctest::Approx(4.0 * layer / 16 * 12));
    check_every_chunk(plan);
  }

  TEST_CASE("Mixtral 8x22B: EP 8 over 4 stages, experts sharded over their own dp") {
    const Args mixtral = {"--num-layers", "56", "--hidden-size", "6144", "--ffn-hidden-size",
                          "16384", "--num-attention-heads", "48", "--group-query-attention",
                          "--num-query-groups", "8", "--swiglu", "--normalization", "RMSNorm",
                          "--disable-bias-linear", "--position-embedding-type", "rope",
                          "--untie-embeddings-and-output-weights", "--vocab-size", "32768",
                          "--num-experts", "8", "--moe-grouped-gemm",
                          "--tensor-model-parallel-size", "2",
                          "--pipeline-model-parallel-size", "4",
                          "--expert-model-parallel-size", "8",
                          "--expert-tensor-parallel-size", "1", "--bf16",
                          "--use-distributed-optimizer"};
    const JobSpec j = job(mixtral, 256);
    CHECK(j.dp == 32);
    CHECK(j.expert_dp == 8);  // 256 / (etp 1 x ep 8 x pp 4)
    const JobPlan plan = expect_ok(plan_job(j));
    for (std::int64_t s = 0; s < 4; ++s) CHECK(chunk(plan, s, 0).placement.layers == iota(14 * s, 14));
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
    const Args qwen = {"--num-layers", "94", "--hidden-size", "4096", "--ffn-hidden-size",
                       "12288", "--num-attention-heads", "64", "--group-query-attention",
                       "--num-query-groups", "4", "--kv-channels", "128", "--qk-layernorm",
                       "--swiglu", "--normalization", "RMSNorm", "--disable-bias-linear",
                       "--position-embedding-type", "rope",
                       "--untie-embeddings-and-output-weights", "--vocab-size", "151936",
                       "--num-experts", "128", "--moe-ffn-hidden-size", "1536",
                       "--moe-grouped-gemm", "--tensor-model-parallel-size", "4",
                       "--pipeline-model-parallel-size", "8",
                       "--decoder-first-pipeline-num-layers", "10",
                       "--decoder-last-pipeline-num-layers", "12",
                       "--expert-model-parallel-size", "16",
                       "--expert-tensor-parallel-size", "1", "--bf16",
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
          hf.spec, {}, ChunkPlacement{0, 0, iota(0, hf.spec.num_layers()), {}, true, true, true,
                                      false});
      const JobPlan plan = expect_ok(plan_job(
          job({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank",
               "2", "--use-distributed-optimizer"},
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

TEST_SUITE("job") {
  // --transformer-impl local: Megatron-Core's own modules (gpt_layer_specs.py:359-464,
  // get_gpt_layer_local_submodules): input_layernorm and pre_mlp_layernorm are modules of
  // their own, registered before self_attention and mlp, where the Transformer Engine spec
  // fuses them into linear_qkv and linear_fc1; routed experts are a SequentialMLP even with
  // --moe-grouped-gemm. The names, order and shapes below are those of Megatron-LM's own
  // GPTModel built with get_gpt_layer_local_spec at d98e8a64 (named_parameters(), layer 0).
  TEST_CASE("--transformer-impl local registers Megatron-Core's norms and experts") {
    const auto layer0 = [](const Args& extra) {
      const Args args = Args{"--transformer-impl", "local", "--num-layers", "2", "--hidden-size",
                             "64", "--num-attention-heads", "4", "--vocab-size", "128",
                             "--max-position-embeddings", "32",
                             "--untie-embeddings-and-output-weights"} +
                        extra;
      const JobPlan plan = expect_ok(plan_job(job(args, 1)));
      std::vector<std::string> out;
      for (const Param& p : plan.chunks[0].manifest.params) {
        const std::string name(p.name);
        if (name.find(".layers.1.") != std::string::npos) continue;
        std::string shape;
        for (std::int64_t d : p.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
        out.push_back(name + " " + shape);
      }
      return out;
    };
    const std::string l = "decoder.layers.0.";
    CHECK(layer0({"--normalization", "LayerNorm"}) ==
          Args{"embedding.word_embeddings.weight 128x64",
               "embedding.position_embeddings.weight 32x64",
               l + "input_layernorm.weight 64", l + "input_layernorm.bias 64",
               l + "self_attention.linear_proj.weight 64x64",
               l + "self_attention.linear_proj.bias 64",
               l + "self_attention.linear_qkv.weight 192x64",
               l + "self_attention.linear_qkv.bias 192",
               l + "pre_mlp_layernorm.weight 64", l + "pre_mlp_layernorm.bias 64",
               l + "mlp.linear_fc1.weight 256x64", l + "mlp.linear_fc1.bias 256",
               l + "mlp.linear_fc2.weight 64x256", l + "mlp.linear_fc2.bias 64",
               "decoder.final_layernorm.weight 64", "decoder.final_layernorm.bias 64",
               "output_layer.weight 128x64"});
    Args moe = {"embedding.word_embeddings.weight 128x64",
                "embedding.position_embeddings.weight 32x64", l + "input_layernorm.weight 64",
                l + "self_attention.linear_proj.weight 64x64",
                l + "self_attention.linear_qkv.weight 192x64",
                l + "pre_mlp_layernorm.weight 64", l + "mlp.router.weight 4x64"};
    for (int e = 0; e < 4; ++e) {
      const std::string x = l + "mlp.experts.local_experts." + std::to_string(e) + ".";
      moe.push_back(x + "linear_fc1.weight 256x64");
      moe.push_back(x + "linear_fc2.weight 64x256");
    }
    moe.push_back("decoder.final_layernorm.weight 64");
    moe.push_back("output_layer.weight 128x64");
    const Args rms_moe = {"--normalization", "RMSNorm", "--num-experts", "4",
                          "--disable-bias-linear"};
    CHECK(layer0(rms_moe + Args{"--moe-grouped-gemm"}) == moe);
    moe.insert(moe.begin() + 5, {l + "self_attention.q_layernorm.weight 16",
                                 l + "self_attention.k_layernorm.weight 16"});
    CHECK(layer0(rms_moe + Args{"--qk-layernorm"}) == moe);
    // What the local spec builds beyond these is refused, saying so.
    CHECK(job_error(small_model() + Args{"--transformer-impl", "local", "--multi-latent-attention",
                                         "--position-embedding-type", "rope"},
                    1)
              .find("local with multi-latent attention is not modelled") != std::string::npos);
  }
}
