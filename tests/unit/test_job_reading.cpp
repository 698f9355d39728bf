// job: Megatron-LM's arguments read as Megatron-LM reads them: defaults, the sizes it
// derives, and what it refuses.
#include <doctest/doctest.h>

#include "paramlayout/plan_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::job_error;
using paramlayout::test::operator+;

namespace {

Args small_model(std::int64_t layers = 4) { return test::small_job_args(layers); }

JobSpec job(const Args& args, std::int64_t world, const HfModel* hf = nullptr) {
  return test::job_spec(args, world, hf);
}

HfModel hf_config(const std::string& name) { return test::hf_model(name); }

}  // namespace

TEST_SUITE("job") {
  TEST_CASE("arguments are read as argparse reads them") {
    const JobSpec j =
        job(small_model() + Args{"--tensor-model-parallel-size=2", "--lr", "1e-4", "--data-path",
                                 "a", "b", "--bf16", "--tensor-model-parallel-size", "4"},
            8);
    CHECK(j.parallel.tp == 4);  // the last occurrence wins
    CHECK(j.dp == 2);
    CHECK(j.ignored_arguments == Args{"--lr 1e-4", "--data-path a b"});
    CHECK(job_error(Args{"stray"} + small_model(), 1)
              .find("'stray' (a value no argument "
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
    CHECK(job(small_model() + Args{"--swiglu"}, 1).model.ffn_hidden_size ==
          128);  // 4h x 2/3, to 64
    CHECK(j.param_dtype == DType::float32);
    CHECK(j.strategy == Strategy::unpadded);
  }

  TEST_CASE("the world splits into dp = world / (tp pp cp) and expert dp = world / (etp ep pp)") {
    const Args moe = small_model() + Args{"--num-experts", "8", "--disable-bias-linear"};
    const JobSpec j =
        job(moe + Args{"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                       "--context-parallel-size", "2", "--expert-model-parallel-size", "4",
                       "--expert-tensor-parallel-size", "1", "--use-distributed-optimizer"},
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

    const Args pipeline = {"--pipeline-model-parallel-size",
                           "2",
                           "--num-virtual-stages-per-pipeline-rank",
                           "2",
                           "--use-distributed-optimizer",
                           "--overlap-grad-reduce"};
    const JobPlan plan = expect_ok(plan_job(job(small_model(8) + pipeline, 32)));
    // Only the first chunk of the first stage is bucketed, at max(40M, 1M x dp) for dp 16.
    std::vector<std::optional<std::int64_t>> sizes;
    for (const JobChunk& c : plan.chunks) sizes.push_back(c.layout.options.bucket_size);
    CHECK(sizes == std::vector<std::optional<std::int64_t>>{40'000'000, std::nullopt, std::nullopt,
                                                            std::nullopt});
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
    CHECK(job(moe + Args{"--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"},
              2)
              .parallel.etp == 1);
    // moe/experts.py:205-207: TE's grouped experts with biases refuse bias-dropout fusion.
    CHECK(job_error(moe + Args{"--moe-grouped-gemm"}, 1).find("--moe-grouped-gemm: with biases") ==
          0);
    CHECK(job(moe + Args{"--moe-grouped-gemm", "--no-bias-dropout-fusion"}, 1)
              .model.moe.grouped_gemm);
  }

  TEST_CASE("a model argument that disagrees with --hf-config is named") {
    const HfModel llama = hf_config("llama3-8b");
    CHECK(job({"--num-layers", "32", "--swiglu"}, 1, &llama).model.num_layers() == 32);
    Result<JobSpec> r = job_from_megatron_args({"--hidden-size", "8192"}, 1, &llama);
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "--hidden-size: 8192 disagrees with the --hf-config model's "
          "4096; drop one");
  }
}
