// synth over every shipped Hugging Face config: the publishers' parameter counts (every
// difference named in published.json), the reference and shipped manifests' params, and
// tensor / pipeline / expert splits that add back up to the whole model or are refused as
// Megatron-LM refuses them.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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

json published() { return json::parse(read_text(source_path("testdata/configs/published.json"))); }

/// Every shipped config, by name ("llama3-8b").
std::vector<std::string> shipped_configs() {
  std::vector<std::string> names;
  const json all = published();
  for (const auto& [name, entry] : all.items()) {
    if (name[0] != '_') names.push_back(name);
  }
  return names;
}

std::string config_text(const std::string& config) {
  return read_text(source_path("testdata/configs/" + config + ".json"));
}

Result<SynthModel> try_synth(const std::string& config, const SynthOptions& options) {
  return synth_model(config_text(config), config, options);
}

std::string synth_error(const std::string& text, SynthOptions options = {}) {
  Result<SynthModel> r = synth_model(text, "config.json", options);
  REQUIRE_FALSE(r);
  return r.error().message;
}

/// name -> shape
std::map<std::string, std::vector<std::int64_t>> shapes(const SynthModel& m) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const ChunkParam& p : m.params) out[p.name] = p.shape;
  return out;
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::int64_t sum_of(const json& entry, const char* key) {
  std::int64_t sum = 0;
  if (entry.contains(key)) {
    for (const json& d : entry.at(key)) sum += d.at("elements").get<std::int64_t>();
  }
  return sum;
}

/// The splits Megatron-LM refuses among those the tests below try, by config and split:
/// its TransformerConfig wants heads divisible by tp and key/value heads a multiple or a
/// divisor of tp; MoELayer wants experts divisible by ep; the pipeline split wants layers
/// divisible by the stages.
const std::map<std::string, std::string> kRefused = {
    {"gemma3-1b tp8", "--tp 8 does not divide the 4 attention heads"},
    {"gpt2 tp8", "--tp 8 does not divide the 12 attention heads"},
    {"qwen2-7b tp8", "--tp 8 does not divide the 28 attention heads"},
    {"qwen2.5-7b tp8", "--tp 8 does not divide the 28 attention heads"},
    {"phi4 tp4", "--tp 4 is neither a multiple nor a divisor of the 10 key/value heads"},
    {"phi4 tp8", "--tp 8 is neither a multiple nor a divisor of the 10 key/value heads"},
    {"qwen1.5-moe-a2.7b ep8", "--ep 8 does not divide the 60 experts"},
    {"deepseek-v3 pp2", "the 61 layers are not divisible by the 2 pipeline stages"},
    {"deepseek-v3 pp4", "the 61 layers are not divisible by the 4 pipeline stages"},
    {"gemma-2b pp4", "the 18 layers are not divisible by the 4 pipeline stages"},
    {"gemma2-9b pp4", "the 42 layers are not divisible by the 4 pipeline stages"},
    {"gemma3-1b pp4", "the 26 layers are not divisible by the 4 pipeline stages"},
    {"glm-4.5-air pp4", "the 46 layers are not divisible by the 4 pipeline stages"},
    {"llama3.1-nemotron-ultra-253b pp4",
     "the 162 layers are not divisible by the 4 pipeline stages"},
    {"minimax-m2.5 pp4", "the 62 layers are not divisible by the 4 pipeline stages"},
    {"glm-4.7-flash tp8", "--tp 8 does not divide the 20 attention heads"},
    {"glm-4.7-flash pp2", "the 47 layers are not divisible by the 2 pipeline stages"},
    {"glm-4.7-flash pp4", "the 47 layers are not divisible by the 4 pipeline stages"},
    {"ernie-4.5-21b-a3b tp8", "--tp 8 does not divide the 20 attention heads"},
    {"sarvam-30b pp2", "the 19 layers are not divisible by the 2 pipeline stages"},
    {"sarvam-30b pp4", "the 19 layers are not divisible by the 4 pipeline stages"},
    {"kimi-k2 pp2", "the 61 layers are not divisible by the 2 pipeline stages"},
    {"kimi-k2 pp4", "the 61 layers are not divisible by the 4 pipeline stages"},
    {"exaone-4.0-1.2b pp4", "the 30 layers are not divisible by the 4 pipeline stages"},
    {"glm-5 pp4", "the 78 layers are not divisible by the 4 pipeline stages"},
    {"step-3.5-flash pp2", "the 45 layers are not divisible by the 2 pipeline stages"},
    {"step-3.5-flash pp4", "the 45 layers are not divisible by the 4 pipeline stages"},
    {"ministral-3-8b pp4", "the 34 layers are not divisible by the 4 pipeline stages"},
    {"falcon-h1-0.5b tp2", "--tp 2 does not divide the 1 Mamba groups"},
    {"falcon-h1-0.5b tp4", "--tp 4 does not divide the 1 Mamba groups"},
    {"falcon-h1-0.5b tp8", "--tp 8 does not divide the 1 Mamba groups"},
    {"gemma-4-e2b pp2", "the 35 layers are not divisible by the 2 pipeline stages"},
    {"gemma-4-e2b pp4", "the 35 layers are not divisible by the 4 pipeline stages"},
    {"gemma-4-26b-a4b pp4", "the 30 layers are not divisible by the 4 pipeline stages"},
};

/// Synthesizes `config` split as `options` (`split` names it: "tp8"), or checks that the
/// split is one kRefused lists, refused with its reason. Every other split must succeed.
std::optional<SynthModel> split_or_refused(const std::string& config, const std::string& split,
                                           const SynthOptions& options) {
  Result<SynthModel> m = try_synth(config, options);
  const auto refused = kRefused.find(config + " " + split);
  if (refused == kRefused.end()) {
    if (!m) FAIL(m.error().message);
    return std::move(m).value();
  }
  REQUIRE_FALSE(m);
  CHECK(m.error().message == config + ": " + refused->second);
  return std::nullopt;
}

}  // namespace

TEST_SUITE("synth") {
  TEST_CASE("every shipped config has its published parameter count") {
    std::set<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(source_path("testdata/configs"))) {
      if (f.path().extension() == ".json" && f.path().stem() != "published") {
        files.insert(f.path().stem().string());
      }
    }
    const std::vector<std::string> configs = shipped_configs();
    CHECK(files == std::set<std::string>(configs.begin(), configs.end()));
    CHECK(configs.size() >= 50);
  }

  TEST_CASE("every shipped config gives its publisher's parameter count, differences named") {
    // Megatron-LM's params, less its vocabulary padding and (publishers count without them)
    // the multi-token prediction layers, plus what published.json names per model (buffers
    // the checkpoint holds as tensors, a report's larger vocabulary).
    const json all = published();
    for (const std::string& config : shipped_configs()) {
      CAPTURE(config);
      const json& want = all.at(config);
      const SynthModel m = synth_config(config);
      std::int64_t mtp = 0;
      for (const ChunkParam& p : m.params) mtp += starts_with(p.name, "mtp.") ? p.numel() : 0;
      const std::int64_t params = m.numel() - m.vocab_padding;
      const std::int64_t count = params - mtp + sum_of(want, "differences");
      if (want.at("exact").get<bool>()) {
        CHECK(count == want.at("params").get<std::int64_t>());
      } else {
        const double figure = want.at("params").get<double>();
        CHECK(std::abs(static_cast<double>(count) - figure) <=
              want.at("tolerance").get<double>() * figure);
      }
      if (want.contains("checkpoint")) {
        CHECK(params + sum_of(want, "checkpoint_differences") ==
              want.at("checkpoint").get<std::int64_t>());
      }
      if (want.contains("hf_model")) {
        CHECK(params - mtp + sum_of(want, "hf_model_differences") ==
              want.at("hf_model").get<std::int64_t>());
      }
    }
  }

  TEST_CASE("the reference manifests hold the same params as synth makes") {
    // Same names, shapes and attributes. The Megatron-LM references list linear_qkv before
    // linear_proj, while Megatron-LM registers linear_proj first (Attention.__init__ builds
    // it before SelfAttention builds linear_qkv), so order is not compared.
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

  TEST_CASE("the shipped manifests are what synth writes, in Megatron-LM's order") {
    const auto params = [](const std::string& text) { return json::parse(text).at("params"); };
    SynthModel llama = synth_config("llama3-8b");
    llama.model = "llama3-8b";
    CHECK(params(read_text(source_path("testdata/manifests/llama3-8b.json"))) ==
          params(synth_manifest_json(llama, DType::bfloat16)));
    // The same model with a 33rd layer.
    std::string text = config_text("llama3-8b");
    const std::string layers = "\"num_hidden_layers\": 32";
    REQUIRE(text.find(layers) != std::string::npos);
    text.replace(text.find(layers), layers.size(), "\"num_hidden_layers\": 33");
    const SynthModel longer = expect_ok(synth_model(text, "llama3-8b-33-layers", {}));
    CHECK(params(read_text(source_path("testdata/manifests/llama3-8b-33-layers.json"))) ==
          params(synth_manifest_json(longer, DType::bfloat16)));
  }

  TEST_CASE("tensor-parallel slices: each param whole, or one dim split tp ways") {
    for (const std::string& config : shipped_configs()) {
      const SynthModel whole = synth_config(config);
      const auto full = shapes(whole);
      for (std::int64_t tp : {2, 4, 8}) {
        CAPTURE(config);
        CAPTURE(tp);
        SynthOptions options;
        options.tp = tp;
        const std::optional<SynthModel> slice =
            split_or_refused(config, "tp" + std::to_string(tp), options);
        if (!slice) continue;
        REQUIRE(slice->params.size() == whole.params.size());
        std::int64_t split = 0;
        for (const ChunkParam& p : slice->params) {
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
            if (p.shape[d] * tp == shape[d])
              ++dims_split;
            else
              CHECK(p.shape[d] == shape[d]);
          }
          CHECK(dims_split == 1);
          ++split;
        }
        CHECK(split > 0);
      }
    }
  }

  TEST_CASE("pipeline stages add up to the whole model") {
    // Copies of the embedding on later stages (the tied output layer, the embedding that
    // multi-token prediction layers use) are shared with the first stage's: counted once.
    for (const std::string& config : shipped_configs()) {
      const SynthModel whole = synth_config(config);
      for (std::int64_t pp : {2, 4}) {
        CAPTURE(config);
        CAPTURE(pp);
        SynthOptions options;
        options.pp = pp;
        std::int64_t sum = 0;
        std::size_t params = 0;
        bool refused = false;
        for (std::int64_t stage = 0; stage < pp && !refused; ++stage) {
          options.stage = stage;
          const std::optional<SynthModel> m =
              split_or_refused(config, "pp" + std::to_string(pp), options);
          if (!m) {
            refused = true;
            break;
          }
          for (const ChunkParam& p : m->params) {
            if (stage > 0 && p.shared_embedding) continue;
            sum += p.numel();
            ++params;
          }
        }
        if (refused) continue;
        CHECK(sum == whole.numel());
        CHECK(params == whole.params.size());
      }
    }
  }

  TEST_CASE("expert-parallel ranks hold the experts between them") {
    // Routed experts are the params under "mlp.experts."; with ep > 1 they are marked
    // expert-parallel (reduced over the expert data-parallel group), with ep 1 and etp = tp
    // they sit with the dense params, as Megatron-LM's allreduce attribute says.
    const auto is_expert = [](const ChunkParam& p) {
      return p.name.find("mlp.experts.") != std::string::npos;
    };
    int moe_models = 0;
    for (const std::string& config : shipped_configs()) {
      const SynthModel whole = synth_config(config);
      std::int64_t whole_experts = 0;
      for (const ChunkParam& p : whole.params) {
        CHECK_FALSE(p.expert_parallel);
        whole_experts += is_expert(p) ? p.numel() : 0;
      }
      if (whole_experts == 0) continue;
      ++moe_models;
      for (std::int64_t ep : {2, 8}) {
        CAPTURE(config);
        CAPTURE(ep);
        SynthOptions options;
        options.ep = ep;
        const std::optional<SynthModel> rank =
            split_or_refused(config, "ep" + std::to_string(ep), options);
        if (!rank) continue;
        std::int64_t rank_experts = 0;
        for (const ChunkParam& p : rank->params) {
          CHECK(p.expert_parallel == is_expert(p));
          rank_experts += is_expert(p) ? p.numel() : 0;
        }
        CHECK(rank_experts * ep == whole_experts);
        CHECK(rank->numel() - rank_experts == whole.numel() - whole_experts);
      }
    }
    CHECK(moe_models == 19);
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
    plan_options.bucket_size = ddp_fallback_bucket_size(8);
    CHECK(expect_ok(plan(manifest, plan_options)).buffers.size() >= 2);
  }

  TEST_CASE("bad configs and splits are named") {
    const std::string unknown = synth_error(R"({"architectures": ["BertModel"]})");
    CHECK(unknown.find("config.json: /architectures/0: unknown architecture \"BertModel\"; "
                       "known: LlamaForCausalLM, DeciLMForCausalLM") == 0);
    CHECK(unknown.find("paramlayout job --world-size N -o DIR -- --num-layers") !=
          std::string::npos);
    CHECK(synth_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})")
              .find("missing required key \"num_hidden_layers\" (for LlamaForCausalLM)") !=
          std::string::npos);
    CHECK(synth_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -3})")
              .find("config.json: /hidden_size: expected an integer in [1, 16777215], got -3") ==
          0);
    CHECK(
        synth_error(R"({"model_type": "llama"})").find("missing required key \"architectures\"") !=
        std::string::npos);
    CHECK(synth_error("{not json").find("config.json") == 0);
    const std::string llama = config_text("llama3-8b");
    SynthOptions tp3;
    tp3.tp = 3;
    CHECK(synth_error(llama, tp3) == "config.json: --tp 3 does not divide the 32 attention heads");
    SynthOptions stage;
    stage.pp = 2;
    stage.stage = 2;
    CHECK(synth_error(llama, stage) == "config.json: --stage 2 is not below --pp 2");
    SynthOptions ep;
    ep.ep = 2;
    CHECK(synth_error(llama, ep) == "config.json: --ep 2 needs a mixture-of-experts model");
  }
}
