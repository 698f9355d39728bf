// synth: the shapes of Megatron-LM's GPTModel (TE layer spec) from a Hugging Face config.
// Parameter order follows module registration, as named_parameters() yields it:
// embedding, then per layer input_layernorm, self_attention (linear_proj before linear_qkv
// and the q/k norms; MLA's projections after linear_proj), pre_mlp_layernorm, mlp (router,
// experts, shared experts), then final_layernorm and output_layer.
#include "paramlayout/synth.hpp"

#include <fmt/format.h>

#include <limits>
#include <optional>

#include "json_reader.hpp"
#include "json_writer.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout {
namespace {

enum class Family : std::uint8_t { llama, qwen2, qwen3, mixtral, qwen3_moe, deepseek_v3, gpt2 };

struct Architecture {
  std::string_view name;
  Family family;
};

constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", Family::llama},       {"MistralForCausalLM", Family::llama},
    {"Qwen2ForCausalLM", Family::qwen2},       {"Qwen3ForCausalLM", Family::qwen3},
    {"MixtralForCausalLM", Family::mixtral},   {"Qwen3MoeForCausalLM", Family::qwen3_moe},
    {"DeepseekV3ForCausalLM", Family::deepseek_v3}, {"GPT2LMHeadModel", Family::gpt2},
};

/// Everything the emitter needs, read from the config.
struct Shape {
  std::int64_t hidden = 0, layers = 0, vocab = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t ffn = 0;  ///< dense MLP
  bool gated = true;     ///< SwiGLU: fc1 holds gate and up
  bool norm_bias = false, linear_bias = false, qkv_bias = false, qk_norm = false;
  bool tied = false;
  std::int64_t learned_positions = 0;
  // Multi-latent attention (DeepSeek-V3).
  bool mla = false;
  std::int64_t q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v_dim = 0;
  // Mixture of experts.
  std::int64_t experts = 0, moe_ffn = 0, shared_ffn = 0, first_dense = 0, moe_step = 1;
  bool step_from_zero = false;             ///< DeepSeek: layer % freq; Qwen: (layer + 1) % step
  std::vector<std::int64_t> dense_layers;  ///< Qwen3-MoE's mlp_only_layers

  bool moe_layer(std::int64_t i) const {
    if (experts == 0 || i < first_dense) return false;
    if ((step_from_zero ? i : i + 1) % moe_step != 0) return false;
    for (std::int64_t d : dense_layers) {
      if (d == i) return false;
    }
    return true;
  }
};

/// Largest size or count a config may give (far above any model's): products of three
/// stay inside 64 bits.
constexpr std::int64_t kMaxDimension = (std::int64_t{1} << 24) - 1;

/// Most params one chunk may have (DeepSeek-V3, unsplit, has 30,428).
constexpr std::int64_t kMaxParams = 2'000'000;

/// Typed access to the config's top-level fields, with located errors.
class Config {
 public:
  Config(json::Reader& reader, std::string_view architecture)
      : reader_(reader), architecture_(architecture) {}

  std::optional<json::Element> find(std::string_view key) {
    auto value = reader_.root().at_key(key);
    if (value.error() || value.value().is_null()) return std::nullopt;
    return value.value();
  }
  std::int64_t integer(std::string_view key) {
    std::optional<json::Element> e = find(key);
    if (!e) {
      reader_.fail(json::Path(), fmt::format("missing required key \"{}\" (for {})", key,
                                             architecture_));
      return 1;
    }
    return reader_.integer(*e, json::Path().field(key), 1, kMaxDimension);
  }
  std::int64_t integer(std::string_view key, std::int64_t fallback) {
    return find(key) ? integer(key) : fallback;
  }
  bool boolean(std::string_view key, bool fallback) {
    std::optional<json::Element> e = find(key);
    return e ? reader_.boolean(*e, json::Path().field(key)) : fallback;
  }
  std::vector<std::int64_t> integers(std::string_view key) {
    std::vector<std::int64_t> out;
    std::optional<json::Element> e = find(key);
    const json::Path root;
    const json::Path path = root.field(key);
    if (!e || !reader_.is_array(*e, path)) return out;
    std::size_t i = 0;
    for (json::Element item : simdjson::dom::array(*e)) {
      out.push_back(reader_.integer(item, path.item(i++), 0, kMaxDimension));
    }
    return out;
  }

 private:
  json::Reader& reader_;
  std::string_view architecture_;
};

Shape read_shape(Config& c, Family family) {
  Shape s;
  if (family == Family::gpt2) {
    s.hidden = c.integer("n_embd");
    s.layers = c.integer("n_layer");
    s.heads = s.kv_heads = c.integer("n_head");
    s.head_dim = s.hidden / s.heads;
    s.ffn = c.integer("n_inner", 4 * s.hidden);
    s.vocab = c.integer("vocab_size");
    s.learned_positions = c.integer("n_positions");
    s.gated = false;
    s.norm_bias = s.linear_bias = s.qkv_bias = true;
    s.tied = c.boolean("tie_word_embeddings", true);
    return s;
  }
  s.hidden = c.integer("hidden_size");
  s.layers = c.integer("num_hidden_layers");
  s.heads = c.integer("num_attention_heads");
  s.kv_heads = c.integer("num_key_value_heads", s.heads);
  s.head_dim = c.integer("head_dim", s.hidden / s.heads);
  s.vocab = c.integer("vocab_size");
  s.tied = c.boolean("tie_word_embeddings", false);
  s.qkv_bias = family == Family::qwen2 || c.boolean("attention_bias", false);
  s.qk_norm = family == Family::qwen3 || family == Family::qwen3_moe;
  switch (family) {
    case Family::mixtral:
      s.experts = c.integer("num_local_experts");
      s.moe_ffn = c.integer("intermediate_size");
      break;
    case Family::qwen3_moe:
      s.experts = c.integer("num_experts");
      s.moe_ffn = c.integer("moe_intermediate_size");
      s.moe_step = c.integer("decoder_sparse_step", 1);
      s.dense_layers = c.integers("mlp_only_layers");
      s.ffn = c.integer("intermediate_size");
      break;
    case Family::deepseek_v3:
      s.mla = true;
      s.q_lora = c.integer("q_lora_rank", 0);
      s.kv_lora = c.integer("kv_lora_rank");
      s.nope = c.integer("qk_nope_head_dim");
      s.rope = c.integer("qk_rope_head_dim");
      s.v_dim = c.integer("v_head_dim");
      s.experts = c.integer("n_routed_experts");
      s.moe_ffn = c.integer("moe_intermediate_size");
      s.shared_ffn = s.moe_ffn * c.integer("n_shared_experts", 0);
      s.first_dense = c.integer("first_k_dense_replace", 0);
      s.moe_step = c.integer("moe_layer_freq", 1);
      s.step_from_zero = true;
      s.ffn = c.integer("intermediate_size");
      break;
    default:
      s.ffn = c.integer("intermediate_size");
      break;
  }
  return s;
}

/// Appends the params of one rank's chunk.
class Emitter {
 public:
  Emitter(const Shape& s, const SynthOptions& o, std::vector<SynthParam>& out)
      : s_(s), o_(o), etp_(o.etp > 0 ? o.etp : o.tp), out_(out) {}

  std::int64_t padded_vocab() const {
    const std::int64_t multiple = o_.vocab_divisible_by * o_.tp;
    return (s_.vocab + multiple - 1) / multiple * multiple;
  }

  void chunk() {
    const bool first = o_.stage == 0;
    const bool last = o_.stage == o_.pp - 1;
    const bool split_tied = s_.tied && o_.pp > 1;
    if (first) {
      SynthParam& e = add("embedding.word_embeddings.weight", {padded_vocab() / o_.tp, s_.hidden});
      e.embedding_or_output = true;
      e.shared_embedding = split_tied;
      if (s_.learned_positions > 0) {
        add("embedding.position_embeddings.weight", {s_.learned_positions, s_.hidden});
      }
    }
    const std::int64_t per_stage = s_.layers / o_.pp;
    for (std::int64_t local = 0; local < per_stage; ++local) {
      layer(fmt::format("decoder.layers.{}.", local), o_.stage * per_stage + local);
    }
    if (last) {
      norm("decoder.final_layernorm.", "weight", "bias", s_.hidden);
      if (!s_.tied || split_tied) {
        SynthParam& p = add("output_layer.weight", {padded_vocab() / o_.tp, s_.hidden});
        p.embedding_or_output = true;
        p.shared_embedding = split_tied;
      }
    }
  }

 private:
  SynthParam& add(std::string name, std::vector<std::int64_t> shape) {
    SynthParam& p = out_.emplace_back();
    p.name = std::move(name);
    p.shape = std::move(shape);
    return p;
  }

  void norm(const std::string& prefix, std::string_view weight, std::string_view bias,
            std::int64_t n) {
    add(prefix + std::string(weight), {n});
    if (s_.norm_bias) add(prefix + std::string(bias), {n});
  }

  /// A column- or row-parallel linear; `fused_norm` for TE's LayerNorm+Linear.
  void linear(const std::string& prefix, std::int64_t out, std::int64_t in, bool bias,
              std::int64_t fused_norm = 0) {
    if (fused_norm > 0) norm(prefix, "layer_norm_weight", "layer_norm_bias", fused_norm);
    add(prefix + "weight", {out, in});
    if (bias) add(prefix + "bias", {out});
  }

  void layer(const std::string& p, std::int64_t global) {
    const std::int64_t tp = o_.tp;
    const std::int64_t h = s_.hidden;
    const bool moe = s_.moe_layer(global);
    const std::string a = p + "self_attention.";
    if (s_.mla) {
      norm(p + "input_layernorm.", "weight", "bias", h);
      linear(a + "linear_proj.", h, s_.heads * s_.v_dim / tp, false);
      const std::int64_t q_out = s_.heads * (s_.nope + s_.rope) / tp;
      if (s_.q_lora > 0) {
        linear(a + "linear_q_down_proj.", s_.q_lora, h, false);
        linear(a + "linear_q_up_proj.", q_out, s_.q_lora, false, s_.q_lora);
      } else {
        linear(a + "linear_q_proj.", q_out, h, false);
      }
      linear(a + "linear_kv_down_proj.", s_.kv_lora + s_.rope, h, false);
      linear(a + "linear_kv_up_proj.", s_.heads * (s_.nope + s_.v_dim) / tp, s_.kv_lora, false,
             s_.kv_lora);
    } else {
      linear(a + "linear_proj.", h, s_.heads * s_.head_dim / tp, s_.linear_bias);
      linear(a + "linear_qkv.", (s_.heads + 2 * s_.kv_heads) * s_.head_dim / tp, h, s_.qkv_bias,
             h);
      if (s_.qk_norm) {
        add(a + "q_layernorm.weight", {s_.head_dim});
        add(a + "k_layernorm.weight", {s_.head_dim});
      }
    }
    const std::string m = p + "mlp.";
    const std::int64_t fc1 = s_.gated ? 2 : 1;
    if (!moe) {
      // MLA layers keep their own input norm, so the dense MLP fuses the pre-MLP norm.
      linear(m + "linear_fc1.", fc1 * s_.ffn / tp, h, s_.linear_bias, h);
      linear(m + "linear_fc2.", h, s_.ffn / tp, s_.linear_bias);
      return;
    }
    norm(p + "pre_mlp_layernorm.", "weight", "bias", h);
    add(m + "router.weight", {s_.experts, h});
    const std::int64_t local = s_.experts / o_.ep;
    for (std::int64_t e = 0; e < local; ++e) {
      add(fmt::format("{}experts.linear_fc1.weight{}", m, e), {fc1 * s_.moe_ffn / etp_, h})
          .expert_parallel = true;
    }
    for (std::int64_t e = 0; e < local; ++e) {
      add(fmt::format("{}experts.linear_fc2.weight{}", m, e), {h, s_.moe_ffn / etp_})
          .expert_parallel = true;
    }
    if (s_.shared_ffn > 0) {
      linear(m + "shared_experts.linear_fc1.", fc1 * s_.shared_ffn / tp, h, false);
      linear(m + "shared_experts.linear_fc2.", h, s_.shared_ffn / tp, false);
    }
  }

  const Shape& s_;
  const SynthOptions& o_;
  std::int64_t etp_;
  std::vector<SynthParam>& out_;
};

/// The first split the options ask for that the model does not allow.
std::optional<std::string> split_problem(const Shape& s, const SynthOptions& o) {
  const std::int64_t etp = o.etp > 0 ? o.etp : o.tp;
  const auto divides = [](std::int64_t n, std::int64_t d) { return n % d == 0; };
  if (o.stage >= o.pp) return fmt::format("--stage {} is not below --pp {}", o.stage, o.pp);
  if (!divides(s.layers, o.pp)) {
    return fmt::format("--pp {} does not divide the {} layers", o.pp, s.layers);
  }
  if (!divides(s.heads, o.tp)) {
    return fmt::format("--tp {} does not divide the {} attention heads", o.tp, s.heads);
  }
  if (!s.mla && !divides(s.kv_heads, o.tp)) {
    return fmt::format("--tp {} does not divide the {} key/value heads", o.tp, s.kv_heads);
  }
  if (s.ffn > 0 && !divides(s.ffn, o.tp)) {
    return fmt::format("--tp {} does not divide the MLP size {}", o.tp, s.ffn);
  }
  if (s.experts == 0 && (o.ep > 1 || o.etp > 0)) {
    return std::string("--ep and --etp need a mixture-of-experts model");
  }
  if (s.experts > 0 && !divides(s.experts, o.ep)) {
    return fmt::format("--ep {} does not divide the {} experts", o.ep, s.experts);
  }
  if (s.experts > 0 && !divides(s.moe_ffn, etp)) {
    return fmt::format("--etp {} does not divide the expert MLP size {}", etp, s.moe_ffn);
  }
  if (!divides(s.shared_ffn, o.tp)) {
    return fmt::format("--tp {} does not divide the shared expert MLP size {}", o.tp,
                       s.shared_ffn);
  }
  return std::nullopt;
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::int64_t SynthParam::numel() const { return product(shape); }

std::int64_t SynthModel::numel() const {
  std::int64_t n = 0;
  for (const SynthParam& p : params) n += p.numel();
  return n;
}

std::string_view synth_architectures() {
  return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
         "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GPT2LMHeadModel";
}

Result<SynthModel> synth_model(std::string_view config_text, std::string_view source,
                               const SynthOptions& options) {
  json::Reader reader(source);
  if (!reader.parse(config_text)) return reader.error();
  if (!reader.is_object(reader.root(), json::Path())) return reader.error();

  std::string architecture;
  const json::Path root;
  const json::Path arch_path = root.field("architectures");
  auto list = reader.root().at_key("architectures");
  if (list.error()) {
    reader.fail(json::Path(), "missing required key \"architectures\"");
    return reader.error();
  }
  if (!reader.is_array(list.value(), arch_path)) return reader.error();
  for (json::Element item : simdjson::dom::array(list.value())) {
    architecture = std::string(reader.string(item, arch_path.item(0)));
    break;
  }
  if (reader.failed()) return reader.error();
  const Architecture* known = nullptr;
  for (const Architecture& a : kArchitectures) {
    if (a.name == architecture) known = &a;
  }
  if (known == nullptr) {
    reader.fail(arch_path.item(0), fmt::format("unknown architecture \"{}\"; synth knows {}",
                                               excerpt(architecture), synth_architectures()));
    return reader.error();
  }

  Config config(reader, known->name);
  const Shape shape = read_shape(config, known->family);
  if (reader.failed()) return reader.error();
  if (std::optional<std::string> problem = split_problem(shape, options)) {
    return Error{fmt::format("{}: {}", source, *problem)};
  }

  // Each layer has at most 20 params besides its experts' two each.
  const std::int64_t experts = shape.experts / options.ep;
  if ((shape.layers / options.pp) * (20 + 2 * experts) > kMaxParams) {
    return Error{fmt::format("{}: {} layers of {} experts would make more than {} params in "
                             "one chunk: too many",
                             source, shape.layers / options.pp, experts,
                             group_digits(kMaxParams))};
  }

  SynthModel model;
  model.architecture = architecture;
  Emitter emitter(shape, options, model.params);
  emitter.chunk();
  const std::int64_t pad_rows = (emitter.padded_vocab() - shape.vocab) / options.tp;
  for (const SynthParam& p : model.params) {
    if (p.embedding_or_output) model.vocab_padding += pad_rows * shape.hidden;
  }
  std::int64_t numel = 0;
  for (const SynthParam& p : model.params) {
    if (__builtin_add_overflow(numel, p.numel(), &numel)) {
      return Error{fmt::format("{}: the chunk's params add up to more than {} elements: too "
                               "large",
                               source, group_digits(std::numeric_limits<std::int64_t>::max()))};
    }
  }
  if (known->family == Family::deepseek_v3 && config.integer("num_nextn_predict_layers", 0) > 0) {
    model.notes.push_back("multi-token prediction layers are not included");
  }
  if (reader.failed()) return reader.error();
  return model;
}

std::string synth_manifest_json(const SynthModel& model, DType dtype) {
  std::string text;
  json::Writer w(text);
  w.raw("{\"schema\": \"paramlayout.manifest/v1\", \"model\": ").quoted(model.model);
  w.raw(", \"params\": [");
  const char* sep = "\n  ";
  for (const SynthParam& p : model.params) {
    w.raw(sep).raw("{\"name\": ").quoted(p.name).raw(", \"shape\": [");
    for (std::size_t i = 0; i < p.shape.size(); ++i) {
      if (i > 0) w.raw(", ");
      w.integer(p.shape[i]);
    }
    w.raw("], \"dtype\": ").quoted(to_string(dtype));
    if (p.expert_parallel) w.raw(", \"expert_parallel\": true");
    if (p.embedding_or_output) w.raw(", \"embedding_or_output\": true");
    if (p.shared_embedding) w.raw(", \"shared_embedding\": true");
    w.raw("}");
    sep = ",\n  ";
  }
  w.raw("\n]}\n");
  return text;
}

}  // namespace paramlayout
