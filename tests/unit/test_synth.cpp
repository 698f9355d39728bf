// synth: shipped Hugging Face configs give their publishers' parameter counts, the reference
// manifests' params, and TP / PP / EP slices that add back up to the whole model.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "paramlayout/plan.hpp"
#include "paramlayout/synth.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;
using paramlayout::test::synth_config;

namespace {

const char* const kConfigs[] = {"llama3-8b",     "llama3-70b", "mistral-7b-v0.1",
                                "qwen2-7b",      "qwen3-8b",   "mixtral-8x7b",
                                "qwen3-30b-a3b", "deepseek-v3", "gpt2"};

std::string synth_error(const std::string& text, SynthOptions options = {}) {
  Result<SynthModel> r = synth_model(text, "config.json", options);
  REQUIRE_FALSE(r);
  return r.error().message;
}

/// name -> shape
std::map<std::string, std::vector<std::int64_t>> shapes(const SynthModel& m) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const SynthParam& p : m.params) out[p.name] = p.shape;
  return out;
}

}  // namespace

TEST_SUITE("synth") {
  TEST_CASE("every shipped config gives its published parameter count") {
    const json published = json::parse(read_text(source_path("testdata/configs/published.json")));
    for (const char* config : kConfigs) {
      CAPTURE(config);
      const SynthModel m = synth_config(config);
      const json& want = published.at(config);
      const std::int64_t count = m.numel() - m.vocab_padding;
      if (want.at("exact").get<bool>()) {
        CHECK(count == want.at("params").get<std::int64_t>());
      } else {
        const double published_count = want.at("params").get<double>();
        CHECK(std::abs(static_cast<double>(count) - published_count) <=
              want.at("tolerance").get<double>() * published_count);
      }
    }
  }

  TEST_CASE("the reference manifests hold the same params as synth makes") {
    // Same names, shapes and attributes; the reference lists linear_qkv before linear_proj,
    // while Megatron-LM registers linear_proj first (Attention.__init__ builds it before
    // SelfAttention builds linear_qkv), so order is not compared.
    const auto reference = [](const std::string& name) {
      std::multiset<std::string> out;
      const json manifest =
          json::parse(read_text(source_path("testdata/reference/manifests/" + name)));
      for (const json& p : manifest.at("params")) out.insert(p.dump());
      return out;
    };
    const auto made = [](const SynthModel& m) {
      std::multiset<std::string> out;
      const json manifest = json::parse(synth_manifest_json(m, DType::bfloat16));
      for (const json& p : manifest.at("params")) out.insert(p.dump());
      return out;
    };
    CHECK(made(synth_config("llama3-8b")) == reference("llama3-8b.json"));
    SynthOptions mixtral;
    mixtral.tp = 2;
    mixtral.ep = 8;
    mixtral.etp = 1;
    CHECK(made(synth_config("mixtral-8x7b", mixtral)) == reference("mixtral-8x7b-tp2-ep8.json"));
  }

  TEST_CASE("tensor-parallel slices: each param whole, or one dim split tp ways") {
    for (const char* config : kConfigs) {
      for (std::int64_t tp : {2, 4}) {
        CAPTURE(config);
        CAPTURE(tp);
        SynthOptions options;
        options.tp = tp;
        const SynthModel whole = synth_config(config);
        const SynthModel slice = synth_config(config, options);
        const auto full = shapes(whole);
        REQUIRE(slice.params.size() == whole.params.size());
        std::int64_t split = 0;
        for (const SynthParam& p : slice.params) {
          REQUIRE(full.count(p.name) == 1);
          std::vector<std::int64_t> shape = full.at(p.name);
          if (p.embedding_or_output) {
            // The vocab is padded to a multiple of 128 * tp before it is split.
            const std::int64_t multiple = 128 * tp;
            shape[0] = (shape[0] + multiple - 1) / multiple * multiple;
          }
          if (shape == p.shape) continue;
          int dims_split = 0;
          for (std::size_t d = 0; d < shape.size(); ++d) {
            if (p.shape[d] * tp == shape[d]) ++dims_split;
            else CHECK(p.shape[d] == shape[d]);
          }
          CHECK(dims_split == 1);
          ++split;
        }
        CHECK(split > 0);
      }
    }
  }

  TEST_CASE("pipeline stages add up to the whole model") {
    for (const char* config : kConfigs) {
      for (std::int64_t pp : {2, 4}) {
        const SynthModel whole = synth_config(config);
        SynthOptions options;
        options.pp = pp;
        std::int64_t sum = 0;
        std::int64_t copies = 0;  // the tied embedding's copy on the last stage
        std::size_t params = 0;
        bool divisible = true;
        for (std::int64_t stage = 0; stage < pp; ++stage) {
          options.stage = stage;
          Result<SynthModel> m = synth_model(
              read_text(source_path(std::string("testdata/configs/") + config + ".json")), config,
              options);
          if (!m) {
            CHECK(m.error().message.find("does not divide the") != std::string::npos);
            divisible = false;
            break;
          }
          sum += m->numel();
          params += m->params.size();
          for (const SynthParam& p : m->params) {
            if (p.shared_embedding && p.name == "output_layer.weight") {
              copies += p.numel();
              --params;
            }
          }
        }
        if (!divisible) continue;
        CAPTURE(config);
        CAPTURE(pp);
        CHECK(sum - copies == whole.numel());
        CHECK(params == whole.params.size());
      }
    }
  }

  TEST_CASE("expert-parallel ranks hold the experts between them") {
    for (const char* config : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"}) {
      for (std::int64_t ep : {2, 8}) {
        CAPTURE(config);
        CAPTURE(ep);
        const SynthModel whole = synth_config(config);
        SynthOptions options;
        options.ep = ep;
        const SynthModel rank = synth_config(config, options);
        std::int64_t whole_experts = 0;
        std::int64_t rank_experts = 0;
        for (const SynthParam& p : whole.params) whole_experts += p.expert_parallel ? p.numel() : 0;
        for (const SynthParam& p : rank.params) rank_experts += p.expert_parallel ? p.numel() : 0;
        CHECK(whole_experts > 0);
        CHECK(rank_experts * ep == whole_experts);
        CHECK(rank.numel() - rank_experts == whole.numel() - whole_experts);
      }
    }
  }

  TEST_CASE("tied embeddings: one copy without pipeline, marked on both edge stages with it") {
    const SynthModel single = synth_config("gpt2");
    CHECK(shapes(single).count("output_layer.weight") == 0);
    SynthOptions options;
    options.pp = 2;
    const SynthModel first = synth_config("gpt2", options);
    options.stage = 1;
    const SynthModel last = synth_config("gpt2", options);
    CHECK(first.params.front().name == "embedding.word_embeddings.weight");
    CHECK(first.params.front().shared_embedding);
    CHECK(last.params.back().name == "output_layer.weight");
    CHECK(last.params.back().shared_embedding);
    CHECK(last.params.back().embedding_or_output);
  }

  TEST_CASE("DeepSeek-V3: MLA, shared experts and the first dense layers") {
    const auto s = shapes(synth_config("deepseek-v3"));
    CHECK(s.at("decoder.layers.0.mlp.linear_fc1.weight") == std::vector<std::int64_t>{36864, 7168});
    CHECK(s.count("decoder.layers.2.mlp.router.weight") == 0);
    CHECK(s.at("decoder.layers.3.mlp.router.weight") == std::vector<std::int64_t>{256, 7168});
    CHECK(s.at("decoder.layers.3.mlp.shared_experts.linear_fc1.weight") ==
          std::vector<std::int64_t>{4096, 7168});
    CHECK(s.at("decoder.layers.60.self_attention.linear_q_up_proj.weight") ==
          std::vector<std::int64_t>{128 * 192, 1536});
    CHECK(s.at("decoder.layers.60.self_attention.linear_kv_down_proj.weight") ==
          std::vector<std::int64_t>{576, 7168});
    CHECK(s.count("decoder.layers.60.mlp.experts.linear_fc2.weight255") == 1);
    CHECK(synth_config("deepseek-v3").notes.size() == 1);
  }

  TEST_CASE("the manifest it writes reads back and plans") {
    SynthOptions options;
    options.tp = 2;
    options.ep = 4;
    SynthModel m = synth_config("qwen3-30b-a3b", options);
    m.model = "qwen3-30b-a3b-tp2-ep4";
    const Manifest manifest =
        expect_ok(parse_manifest(synth_manifest_json(m, DType::bfloat16), "synth"));
    REQUIRE(manifest.params.size() == m.params.size());
    CHECK(manifest.model == "qwen3-30b-a3b-tp2-ep4");
    CHECK(manifest.params[0].embedding_or_output);
    PlanOptions plan_options;
    plan_options.strategy = Strategy::layerwise;
    plan_options.dp = 8;
    plan_options.expert_dp = 2;
    plan_options.bucket_size = default_bucket_size(8);
    CHECK(expect_ok(plan(manifest, plan_options)).buffers.size() >= 2);
  }

  TEST_CASE("bad configs and splits are named") {
    CHECK(synth_error(R"({"architectures": ["BertModel"]})")
              .find("config.json: /architectures/0: unknown architecture \"BertModel\"") == 0);
    CHECK(synth_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})")
              .find("missing required key \"num_hidden_layers\" (for LlamaForCausalLM)") !=
          std::string::npos);
    CHECK(synth_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -3})")
              .find("config.json: /hidden_size: expected an integer in [1, 16777215], got -3") == 0);
    CHECK(synth_error(R"({"model_type": "llama"})").find("missing required key \"architectures\"") !=
          std::string::npos);
    CHECK(synth_error("{not json").find("config.json") == 0);
    const std::string llama = read_text(source_path("testdata/configs/llama3-8b.json"));
    SynthOptions tp3;
    tp3.tp = 3;
    CHECK(synth_error(llama, tp3) == "config.json: --tp 3 does not divide the 32 attention heads");
    SynthOptions stage;
    stage.pp = 2;
    stage.stage = 2;
    CHECK(synth_error(llama, stage) == "config.json: --stage 2 is not below --pp 2");
    SynthOptions ep;
    ep.ep = 2;
    CHECK(synth_error(llama, ep) == "config.json: --ep and --etp need a mixture-of-experts model");
  }
}
