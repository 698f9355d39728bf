// Memory per rank: the activation estimate against Korthikanti et al. 2022's Table 2 worked
// out by hand, the micro-batches each pipeline schedule keeps in flight as
// megatron/core/pipeline_parallel/schedules.py counts its warm-up, and the persistent terms
// against the job's own bytes per rank.
#include <doctest/doctest.h>

#include "paramlayout/megatron_args.hpp"
#include "paramlayout/rank_memory.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

constexpr std::int64_t kS = 128, kH = 64, kA = 4, kV = 1024;

/// A small GPT of `layers` layers, hidden 64, 4 heads, a vocabulary of 1024 (padded to itself
/// at tp 1 and 2), sequence 128.
Args gpt(std::int64_t layers) {
  return test::small_gpt_args(layers) +
         Args{"--vocab-size", std::to_string(kV), "--seq-length", std::to_string(kS)};
}

std::vector<RankMemory> memory(const Args& args, std::int64_t world) {
  const JobSpec job = expect_ok(job_from_megatron_args(args, world, nullptr));
  const JobPlan plan = expect_ok(plan_job(job));
  return expect_ok(rank_memory(job, plan));
}

std::int64_t term(const RankMemory& m, const std::string& key) {
  for (const MemoryTerm& t : m.activations.terms) {
    if (t.key == key) return t.bytes;
  }
  for (const MemoryTerm& t : m.persistent) {
    if (t.key == key) return t.bytes;
  }
  return -1;
}

std::vector<std::int64_t> in_flight(const std::vector<RankMemory>& stages) {
  std::vector<std::int64_t> out;
  for (const RankMemory& m : stages) out.push_back(m.activations.microbatches_in_flight);
  return out;
}

}  // namespace

TEST_CASE("a local layer saves 34sbh/t + 5as^2b/t with sequence parallelism (Table 2)") {
  const std::int64_t b = 2, t = 2, layers = 4;
  const auto stages =
      memory(gpt(layers) + Args{"--transformer-impl", "local", "--micro-batch-size", "2",
                                "--tensor-model-parallel-size", "2", "--sequence-parallel"},
             2);
  REQUIRE(stages.size() == 1);
  const std::int64_t layer = (34 * kS * b * kH + 5 * kA * kS * kS * b) / t;
  CHECK(term(stages[0], "decoder_layers") == layers * layer);
  // token ids (int64, every tensor-parallel rank) and the embedding's dropout mask.
  CHECK(term(stages[0], "embedding") == 8 * kS * b + kS * b * kH / t);
  // the final norm's and output layer's inputs, and the loss's fp32 logits.
  CHECK(term(stages[0], "output_and_loss") == 4 * kS * b * kH / t + 4 * kS * b * kV / t);
  CHECK(stages[0].peak_bytes == stages[0].persistent_bytes + stages[0].activation_bytes);
}

TEST_CASE("without sequence parallelism the norms, dropouts and QKV input are whole") {
  const auto stages =
      memory(gpt(2) + Args{"--tensor-model-parallel-size", "2", "--transformer-impl", "local"}, 2);
  // Table 2's no-parallelism row: sbh(10 + 24/t) + 5as^2b/t.
  const std::int64_t layer = kS * kH * (10 + 24 / 2) + 5 * kA * kS * kS / 2;
  CHECK(term(stages[0], "decoder_layers") == 2 * layer);
}

TEST_CASE("selective recompute drops the softmax and Transformer Engine never saves it") {
  const Args line = gpt(2) + Args{"--transformer-impl", "local", "--recompute-activations"};
  CHECK(term(memory(line, 1)[0], "decoder_layers") == 2 * 34 * kS * kH);
  CHECK(term(memory(gpt(2), 1)[0], "decoder_layers") == 2 * 34 * kS * kH);
}

TEST_CASE("full uniform recompute keeps each group's input and one group's working set") {
  const auto stages = memory(gpt(4) + Args{"--recompute-granularity", "full", "--recompute-method",
                                           "uniform", "--recompute-num-layers", "2"},
                             1);
  CHECK(term(stages[0], "decoder_layers") == 2 * 2 * kS * kH);
  CHECK(term(stages[0], "recompute_working_set") == 2 * 34 * kS * kH);
}

TEST_CASE("full block recompute recomputes the first layers of the chunk only") {
  const auto stages = memory(gpt(4) + Args{"--recompute-granularity", "full", "--recompute-method",
                                           "block", "--recompute-num-layers", "1"},
                             1);
  CHECK(term(stages[0], "decoder_layers") == 2 * kS * kH + 3 * 34 * kS * kH);
  CHECK(term(stages[0], "recompute_working_set") == 34 * kS * kH);
}

TEST_CASE("1F1B keeps p - stage micro-batches in flight, fewer when the step has fewer") {
  const Args line = gpt(8) + Args{"--pipeline-model-parallel-size", "4"};
  CHECK(in_flight(memory(line + Args{"--global-batch-size", "16"}, 4)) ==
        std::vector<std::int64_t>{4, 3, 2, 1});
  CHECK(in_flight(memory(line + Args{"--global-batch-size", "2"}, 4)) ==
        std::vector<std::int64_t>{2, 2, 2, 1});
  const auto stages = memory(line + Args{"--global-batch-size", "16"}, 4);
  CHECK(term(stages[0], "decoder_layers") == 4 * 2 * 34 * kS * kH);
  CHECK(term(stages[3], "decoder_layers") == 1 * 2 * 34 * kS * kH);
}

TEST_CASE("the interleaved schedule's warm-up: (p - stage - 1) x 2 + (v - 1) x p, then one") {
  const Args line = gpt(16) + Args{"--pipeline-model-parallel-size",
                                   "4",
                                   "--num-layers-per-virtual-pipeline-stage",
                                   "2",
                                   "--global-batch-size",
                                   "8"};
  const auto stages = memory(line, 4);
  CHECK(in_flight(stages) == std::vector<std::int64_t>{11, 9, 7, 5});
  // Stage 0 holds 11 chunk-micro-batches of 2 layers: 16 x (1 + 3/8) layers in all, the
  // factor theoretical_memory_usage.py applies.
  CHECK(term(stages[0], "decoder_layers") == 11 * 2 * 34 * kS * kH);
}

TEST_CASE("the persistent terms are the stage's buffers and optimizer state, exact") {
  const Args line =
      gpt(4) + Args{"--pipeline-model-parallel-size", "2", "--bf16", "--use-distributed-optimizer"};
  const JobSpec job = expect_ok(job_from_megatron_args(line, 4, nullptr));
  const JobPlan plan = expect_ok(plan_job(job));
  const auto stages = expect_ok(rank_memory(job, plan));
  for (const RankMemory& m : stages) {
    const BytesPerRank b = *stage_memory(plan, m.stage);
    CHECK(term(m, "param_buffers") == b.params);
    CHECK(term(m, "grad_buffers") == b.grads);
    CHECK(term(m, "optimizer_state") == b.optimizer);
    CHECK(term(m, "model_buffers") == 0);  // learned positions, no routers
    CHECK(m.persistent_bytes == b.total());
    for (const MemoryTerm& t : m.persistent) CHECK(t.exactness == Exactness::exact);
    for (const MemoryTerm& t : m.activations.terms) CHECK(t.exactness == Exactness::estimate);
  }
}

TEST_CASE("model buffers: rotary frequencies and table, the routers' expert bias, by hand") {
  // Head dim 64 / 4 = 16, turned at 50%: d = 8, inv_freq 4 fp32 (16 B), the forward's table
  // [128, 1, 1, 8] fp32 (4096 B); two MoE routers of 4 experts, each an fp32 expert_bias and
  // a local_tokens_per_expert Float16Module made bf16 (24 B).
  const Args rope =
      gpt(2) + Args{"--position-embedding-type", "rope", "--rotary-percent", "0.5", "--bf16"};
  CHECK(term(memory(rope, 1)[0], "model_buffers") == 16 + 4096);
  const Args moe = rope + Args{"--num-experts", "4", "--moe-router-enable-expert-bias"};
  CHECK(term(memory(moe, 1)[0], "model_buffers") == 16 + 4096 + 2 * 24);
  // Context parallel 2: the table is this rank's half of the sequence.
  CHECK(term(memory(rope + Args{"--context-parallel-size", "2"}, 2)[0], "model_buffers") ==
        16 + 2048);
  // Learned positions and no routers: nothing.
  CHECK(term(memory(gpt(2), 1)[0], "model_buffers") == 0);
}

TEST_CASE("without --seq-length there is no activation estimate") {
  const auto stages = memory(test::small_gpt_args(2) + Args{"--vocab-size", "1000"}, 1);
  CHECK_FALSE(stages[0].has_activations());
  CHECK(stages[0].peak_bytes == stages[0].persistent_bytes);
}

TEST_CASE("GPUs by name, as their driver reports their memory") {
  CHECK(find_gpu("H100")->bytes == std::int64_t{81559} << 20);
  CHECK(find_gpu("h200")->bytes == std::int64_t{143771} << 20);
  CHECK(find_gpu("h200")->name == "H200");
  CHECK(find_gpu("A100")->bytes == find_gpu("A100-80")->bytes);
  CHECK_FALSE(find_gpu("V100"));
}

TEST_CASE("the loss's logits span the padded vocabulary") {
  // 1000 rows are padded to 1024 (a multiple of 128 x tp) as Megatron-LM's output layer has.
  const auto stages =
      memory(test::small_gpt_args(2) + Args{"--vocab-size", "1000", "--seq-length", "128"}, 1);
  CHECK(term(stages[0], "output_and_loss") == 4 * kS * kH + 4 * kS * 1024);
}

TEST_CASE("local attention saves K and V for every head, fused attention per query group") {
  // dot_product_attention.py:169-175 repeats K and V to the heads before its matmuls.
  const Args gqa = gpt(1) + Args{"--group-query-attention", "--num-query-groups", "2"};
  const auto local = memory(gqa + Args{"--transformer-impl", "local"}, 1);
  CHECK(term(local[0], "decoder_layers") == 34 * kS * kH + 5 * kA * kS * kS);
  // Transformer Engine: K and V of 2 groups of head dim 16 instead of 4 heads.
  const auto fused = memory(gqa, 1);
  CHECK(term(fused[0], "decoder_layers") == 34 * kS * kH - 2 * kS * 2 * (4 - 2) * 16);
}

TEST_CASE("a capacity factor caps each expert's tokens, padding fills them to capacity") {
  // 2 MoE layers of 4 experts, top-2: 128 tokens route 256; each expert's capacity is
  // ceil(256 / 4 x factor) (moe_utils.py get_capacity). A token more costs its permuted copy
  // (2h) and the expert MLP's fc1 output and activation (2 x (32 + 32)), in each layer.
  const Args moe =
      gpt(2) + Args{"--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "32"};
  const auto layers = [&](const Args& extra) {
    return term(memory(moe + extra, 1)[0], "decoder_layers");
  };
  const std::int64_t dropless = layers({});
  const std::int64_t per_token = 2 * kH + 2 * (32 + 32);
  // 1.5: capacity 96, padded to 4 x 96 = 384 tokens; 0.5: capacity 32, 128 kept; 2.0
  // unpadded: capacity 128 each, no token dropped.
  CHECK(layers({"--moe-expert-capacity-factor", "1.5", "--moe-pad-expert-input-to-capacity"}) ==
        dropless + 2 * 128 * per_token);
  CHECK(layers({"--moe-expert-capacity-factor", "0.5"}) == dropless - 2 * 128 * per_token);
  CHECK(layers({"--moe-expert-capacity-factor", "2.0"}) == dropless);
  CHECK(layers({"--moe-expert-capacity-factor", "-1"}) == dropless);  // negative: None
}

TEST_CASE("capacity arguments Megatron-LM's TransformerConfig refuses") {
  const Args moe = gpt(2) + Args{"--num-experts", "4"};
  CHECK(test::job_error(moe + Args{"--moe-pad-expert-input-to-capacity"}, 1)
            .find("needs --moe-expert-capacity-factor") != std::string::npos);
  CHECK(
      test::job_error(
          moe + Args{"--moe-expert-capacity-factor", "-1", "--moe-pad-expert-input-to-capacity"}, 1)
          .find("needs --moe-expert-capacity-factor") != std::string::npos);
  CHECK(test::job_error(moe + Args{"--moe-expert-capacity-factor", "1",
                                   "--moe-router-load-balancing-type", "sinkhorn"},
                        1)
            .find("not sinkhorn") != std::string::npos);
}
