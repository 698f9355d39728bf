// Megatron-LM's model arguments (megatron/training/arguments.py and the TransformerConfig
// fields it generates flags from), with their defaults.
#include "model_args.hpp"

#include "tokenizer_vocab.hpp"

#include <fmt/format.h>

#include <cctype>

namespace paramlayout::job {
namespace {

constexpr std::int64_t kMaxSize = (std::int64_t{1} << 24) - 1;

/// A recursive-descent reader of Python list expressions: lists of integers, '+' to
/// concatenate, '*' to repeat, parentheses.
class ListParser {
 public:
  explicit ListParser(const std::string& text) : text_(text) {}

  std::vector<std::int64_t> parse(std::string& error) {
    std::vector<std::int64_t> out = expression();
    skip_spaces();
    if (error_.empty() && pos_ != text_.size()) fail("unexpected text");
    error = error_;
    return error_.empty() ? out : std::vector<std::int64_t>{};
  }

 private:
  std::vector<std::int64_t> expression() {
    std::vector<std::int64_t> out = term();
    while (error_.empty() && take('+')) {
      std::vector<std::int64_t> more = term();
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }

  std::vector<std::int64_t> term() {
    std::int64_t times = 1;
    if (digit()) {
      times = number();
      if (!take('*')) fail("expected '*' after a count");
    }
    std::vector<std::int64_t> unit = factor();
    if (take('*')) times = number();
    if (times < 0 || static_cast<std::size_t>(times) * unit.size() > (std::size_t{1} << 20)) {
      fail("the list is too long");
      return {};
    }
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < times && error_.empty(); ++i) {
      out.insert(out.end(), unit.begin(), unit.end());
    }
    return out;
  }

  std::vector<std::int64_t> factor() {
    std::vector<std::int64_t> out;
    if (take('(')) {
      out = expression();
      if (!take(')')) fail("expected ')'");
      return out;
    }
    if (!take('[')) {
      fail("expected '[' or '('");
      return out;
    }
    if (take(']')) return out;
    do {
      out.push_back(number());
    } while (error_.empty() && take(','));
    if (!take(']')) fail("expected ']'");
    return out;
  }

  std::int64_t number() {
    skip_spaces();
    if (!digit()) {
      fail("expected a number");
      return 0;
    }
    std::int64_t n = 0;
    while (digit() && n < kMaxSize) n = n * 10 + (text_[pos_++] - '0');
    return n;
  }

  bool digit() {
    skip_spaces();
    return pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]));
  }
  bool take(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  void fail(std::string_view what) {
    if (error_.empty()) error_ = fmt::format("{} at character {}", what, pos_ + 1);
  }

  const std::string& text_;
  std::size_t pos_ = 0;
  std::string error_;
};

/// Which layers a frequency argument marks: an int N marks layer i when `marks(i, N)`, a
/// list marks the layers whose entry is 1.
template <class Marks>
std::vector<bool> layer_marks(ArgMap& args, std::string_view name, std::int64_t layers,
                              Marks marks) {
  std::vector<bool> out(static_cast<std::size_t>(layers), false);
  const std::optional<std::string> text = args.string(name);
  if (!text || text->find('[') == std::string::npos) {
    const std::int64_t n = text ? args.integer(name, 1, 1, kMaxSize) : 1;
    for (std::int64_t i = 0; i < layers; ++i) out[static_cast<std::size_t>(i)] = marks(i, n);
    return out;
  }
  std::string error;
  const std::vector<std::int64_t> list = parse_layer_list(*text, error);
  if (!error.empty()) {
    args.fail(name,
              fmt::format("expected an integer or a list such as \"([0]*3+[1]*58)\": {}", error));
  } else if (static_cast<std::int64_t>(list.size()) != layers) {
    args.fail(name,
              fmt::format("the list has {} entries, one per layer is {}", list.size(), layers));
  } else {
    for (std::size_t i = 0; i < list.size(); ++i) out[i] = list[i] == 1;
  }
  return out;
}

/// The layers of a hybrid pattern ("M-M*-|M-M*-/*E"): one symbol per layer, '|' between
/// pipeline stages, '/' before each multi-token prediction layer's own pattern.
void read_hybrid_pattern(ArgMap& args, std::string_view name, const std::string& pattern,
                         ModelSpec& m, std::vector<std::int64_t>& stages) {
  const std::size_t slash = pattern.find('/');
  const std::string main = pattern.substr(0, slash);
  const auto layer_of = [&](char c, LayerSpec& l) {
    switch (c) {
      case 'M':
        l = {Mixer::mamba, Mlp::none};
        return true;
      case 'G':
        l = {Mixer::gated_delta_net, Mlp::none};
        return true;
      case '*':
      case '+':
        l = {Mixer::attention, Mlp::none};
        return true;
      case '-':
        l = {Mixer::none, Mlp::dense};
        return true;
      case 'E':
        l = {Mixer::none, Mlp::moe};
        return true;
      default:
        return false;
    }
  };
  if (main.find('*') != std::string::npos && main.find('+') != std::string::npos) {
    args.fail(name, "mixes standard ('*') and multi-latent ('+') attention");
  }
  if (pattern.find('D') != std::string::npos) {
    args.fail(name, "DeepSeek sparse attention ('D') layers are not modelled");
  }
  m.layers.clear();
  stages.clear();
  std::int64_t in_stage = 0;
  for (char c : main) {
    LayerSpec layer;
    if (c == '|') {
      stages.push_back(in_stage);
      in_stage = 0;
    } else if (layer_of(c, layer)) {
      m.layers.push_back(layer);
      ++in_stage;
    } else {
      args.fail(name, fmt::format("'{}' is not a layer symbol (M mamba, G gated delta net, * "
                                  "attention, + multi-latent attention, - MLP, E MoE, | stage, "
                                  "/ multi-token prediction)",
                                  c));
      return;
    }
  }
  if (!stages.empty()) stages.push_back(in_stage);
  if (main.find('+') != std::string::npos && !m.mla) m.mla = MlaSpec{};
  if (slash == std::string::npos) return;
  std::string part;
  std::vector<std::string> parts;
  for (std::size_t i = slash + 1; i <= pattern.size(); ++i) {
    if (i == pattern.size() || pattern[i] == '/') {
      parts.push_back(part);
      part.clear();
    } else {
      part += pattern[i];
    }
  }
  for (const std::string& p : parts) {
    if (p != parts.front()) args.fail(name, "every multi-token prediction part must be the same");
  }
  m.mtp_num_layers = static_cast<std::int64_t>(parts.size());
  for (char c : parts.front()) {
    LayerSpec layer;
    if (layer_of(c, layer))
      m.hybrid_mtp_layers.push_back(layer);
    else
      args.fail(name, fmt::format("'{}' is not a layer symbol", c));
  }
}

void read_attention(ArgMap& a, ModelSpec& m) {
  m.num_attention_heads = a.integer("--num-attention-heads", 0, 1, kMaxSize);
  if (m.num_attention_heads == 0) a.fail("--num-attention-heads", "is required (or --hf-config)");
  m.num_query_groups = m.num_attention_heads;
  if (a.flag("--group-query-attention")) {
    m.num_query_groups = a.integer("--num-query-groups", 1, 1, kMaxSize);
  } else {
    a.has("--num-query-groups");  // argparse default 1, used only with --group-query-attention
  }
  m.kv_channels = a.integer("--kv-channels", 0, 1, kMaxSize);
  m.qk_layernorm = a.flag("--qk-layernorm");
  m.add_bias_linear = !a.flag("--disable-bias-linear");
  m.add_qkv_bias = a.flag("--add-qkv-bias") || m.add_bias_linear;
  m.attention_output_gate = a.flag("--attention-output-gate");
  if (a.flag("--multi-latent-attention")) {
    MlaSpec mla;
    mla.q_lora_rank = a.integer("--q-lora-rank", 0, 1, kMaxSize);
    mla.kv_lora_rank = a.integer("--kv-lora-rank", 32, 1, kMaxSize);
    mla.qk_head_dim = a.integer("--qk-head-dim", 128, 1, kMaxSize);
    mla.qk_pos_emb_head_dim = a.integer("--qk-pos-emb-head-dim", 64, 0, kMaxSize);
    mla.v_head_dim = a.integer("--v-head-dim", 128, 1, kMaxSize);
    m.mla = mla;
  }
}

void read_mlp(ArgMap& a, ModelSpec& m) {
  const bool swiglu = a.flag("--swiglu");
  m.gated_linear_unit = swiglu || a.flag("--quick-geglu");
  a.flag("--squared-relu");
  const std::int64_t h = m.hidden_size;
  m.ffn_hidden_size =
      a.integer("--ffn-hidden-size", swiglu ? 4 * h * 2 / 3 / 64 * 64 : 4 * h, 1, kMaxSize);
  m.moe.num_experts = a.integer("--num-experts", 0, 0, kMaxSize);
  if (m.moe.num_experts == 0) return;
  m.moe.ffn_hidden_size = a.integer("--moe-ffn-hidden-size", m.ffn_hidden_size, 1, kMaxSize);
  m.moe.shared_expert_size = a.integer("--moe-shared-expert-intermediate-size", 0, 1, kMaxSize);
  m.moe.shared_expert_gate = a.flag("--moe-shared-expert-gate");
  if (m.hybrid) return;
  const std::vector<bool> moe =
      layer_marks(a, "--moe-layer-freq", m.num_layers(),
                  [](std::int64_t i, std::int64_t n) { return i % n == 0; });
  for (std::size_t i = 0; i < moe.size(); ++i) {
    if (moe[i]) m.layers[i].mlp = Mlp::moe;
  }
}

void read_linear_attention(ArgMap& a, ModelSpec& m) {
  const std::optional<std::string> variant = a.string("--experimental-attention-variant");
  if (!variant) return;
  if (*variant != "gated_delta_net" && *variant != "gdn") {
    a.fail("--experimental-attention-variant",
           fmt::format("'{}' is not modelled (gated_delta_net is)", *variant));
    return;
  }
  GatedDeltaNetSpec& g = m.gated_delta_net;
  g.key_head_dim = a.integer("--linear-key-head-dim", g.key_head_dim, 1, kMaxSize);
  g.num_key_heads = a.integer("--linear-num-key-heads", g.num_key_heads, 1, kMaxSize);
  g.value_head_dim = a.integer("--linear-value-head-dim", g.value_head_dim, 1, kMaxSize);
  g.num_value_heads = a.integer("--linear-num-value-heads", g.num_value_heads, 1, kMaxSize);
  g.conv_kernel = a.integer("--linear-conv-kernel-dim", g.conv_kernel, 1, kMaxSize);
  // An int N keeps full attention on every Nth layer; a list marks linear attention with 1.
  if (!a.has("--linear-attention-freq")) {
    a.fail("--linear-attention-freq", "is required with --experimental-attention-variant");
    return;
  }
  const std::vector<bool> linear =
      layer_marks(a, "--linear-attention-freq", m.num_layers(),
                  [](std::int64_t i, std::int64_t n) { return (i + 1) % n != 0; });
  for (std::size_t i = 0; i < linear.size(); ++i) {
    if (linear[i]) m.layers[i].mixer = Mixer::gated_delta_net;
  }
}

void read_positions(ArgMap& a, ModelSpec& m) {
  const std::string type = position_embedding_type(a);
  if (type == "learned_absolute") {
    m.position_embedding = PositionEmbedding::learned_absolute;
    m.max_position_embeddings = a.integer("--max-position-embeddings", 0, 1, kMaxSize);
    if (m.max_position_embeddings == 0) {
      a.fail("--max-position-embeddings", "is required with learned absolute positions");
    }
  } else if (type == "rope" || type == "yarn" || type == "mrope" || type == "none") {
    m.position_embedding = type == "none" ? PositionEmbedding::none : PositionEmbedding::rope;
    a.has("--max-position-embeddings");
  } else {
    a.fail("--position-embedding-type",
           fmt::format("'{}' is not one of learned_absolute, rope, yarn, mrope, none", type));
  }
}

}  // namespace

std::string position_embedding_type(ArgMap& a) {
  std::string type = a.string("--position-embedding-type").value_or("learned_absolute");
  if (a.flag("--use-rotary-position-embeddings")) type = "rope";
  if (a.flag("--no-position-embedding") && type != "rope") type = "none";
  return type;
}

std::vector<std::int64_t> parse_layer_list(const std::string& text, std::string& error) {
  return ListParser(text).parse(error);
}

ModelSpec read_model_args(ArgMap& a, std::vector<std::int64_t>& hybrid_stages,
                          const FileReader& files, std::vector<std::string>& notes) {
  ModelSpec m;
  m.hidden_size = a.integer("--hidden-size", 0, 1, kMaxSize);
  if (m.hidden_size == 0) a.fail("--hidden-size", "is required (or --hf-config)");
  std::optional<std::string> pattern = a.string("--hybrid-layer-pattern");
  const std::string_view pattern_name =
      pattern ? "--hybrid-layer-pattern" : "--hybrid-override-pattern";
  if (!pattern) pattern = a.string("--hybrid-override-pattern");
  if (pattern) {
    m.hybrid = true;
    read_hybrid_pattern(a, pattern_name, *pattern, m, hybrid_stages);
    a.has("--num-layers");
    m.mamba.state_dim = a.integer("--mamba-state-dim", m.mamba.state_dim, 1, kMaxSize);
    m.mamba.head_dim = a.integer("--mamba-head-dim", m.mamba.head_dim, 1, kMaxSize);
    m.mamba.num_groups = a.integer("--mamba-num-groups", m.mamba.num_groups, 1, kMaxSize);
    m.mamba.num_heads = a.integer("--mamba-num-heads", 0, 1, kMaxSize);
  } else {
    const std::int64_t layers = a.integer("--num-layers", 0, 1, kMaxSize);
    if (layers == 0) a.fail("--num-layers", "is required (or --hf-config)");
    m.layers.assign(static_cast<std::size_t>(layers), LayerSpec{});
  }
  std::optional<MlaSpec> pattern_mla = m.mla;
  read_attention(a, m);
  if (pattern_mla && !m.mla) m.mla = pattern_mla;
  read_mlp(a, m);
  read_linear_attention(a, m);
  const std::string norm = a.string("--normalization").value_or("LayerNorm");
  if (norm != "LayerNorm" && norm != "RMSNorm") {
    a.fail("--normalization", fmt::format("expected LayerNorm or RMSNorm, got '{}'", norm));
  }
  m.normalization = norm == "RMSNorm" ? Normalization::rms_norm : Normalization::layer_norm;
  m.untie_embeddings_and_output_weights = a.flag("--untie-embeddings-and-output-weights");
  read_positions(a, m);
  read_vocab_args(a, m, files, notes);
  return m;
}

void check_model_args_agree(ArgMap& a, const ModelSpec& m) {
  const auto agree = [&](std::string_view name, std::int64_t value) {
    if (std::optional<std::int64_t> given = a.maybe_integer(name, 0); given && *given != value) {
      a.fail(name,
             fmt::format("{} disagrees with the --hf-config model's {}; drop one", *given, value));
    }
  };
  const auto agree_flag = [&](std::string_view name, bool value) {
    if (a.flag(name) && !value) {
      a.fail(name, "disagrees with the --hf-config model; drop one");
    }
  };
  agree("--num-layers", m.num_layers());
  agree("--hidden-size", m.hidden_size);
  agree("--num-attention-heads", m.num_attention_heads);
  agree("--kv-channels", m.head_dim());
  if (a.flag("--group-query-attention"))
    agree("--num-query-groups", m.query_groups({}));
  else
    a.has("--num-query-groups");
  agree("--vocab-size", m.vocab_size);
  if (m.uses(Mlp::dense)) agree("--ffn-hidden-size", m.ffn_hidden_size);
  if (m.moe.num_experts > 0) {
    agree("--num-experts", m.moe.num_experts);
    agree("--moe-ffn-hidden-size", m.moe.ffn_hidden_size);
    agree("--moe-shared-expert-intermediate-size", m.moe.shared_expert_size);
  }
  if (m.mla) {
    agree("--q-lora-rank", m.mla->q_lora_rank);
    agree("--kv-lora-rank", m.mla->kv_lora_rank);
    agree("--qk-head-dim", m.mla->qk_head_dim);
    agree("--qk-pos-emb-head-dim", m.mla->qk_pos_emb_head_dim);
    agree("--v-head-dim", m.mla->v_head_dim);
  }
  agree_flag("--swiglu", m.gated_linear_unit);
  agree_flag("--untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights);
  agree_flag("--qk-layernorm", m.qk_layernorm);
  agree_flag("--disable-bias-linear", !m.add_bias_linear);
  agree_flag("--add-qkv-bias", m.add_qkv_bias);
  agree_flag("--multi-latent-attention", m.mla.has_value());
  if (std::optional<std::string> norm = a.string("--normalization")) {
    const bool rms = m.normalization == Normalization::rms_norm;
    if (*norm != (rms ? "RMSNorm" : "LayerNorm")) {
      a.fail("--normalization", "disagrees with the --hf-config model; drop one");
    }
  }
  for (std::string_view ignored : {"--max-position-embeddings", "--position-embedding-type",
                                   "--use-rotary-position-embeddings", "--moe-layer-freq",
                                   "--tokenizer-type", "--tokenizer-model"}) {
    a.has(ignored);
  }
}

void read_build_args(ArgMap& a, ModelSpec& m, std::vector<std::string>& notes) {
  m.make_vocab_size_divisible_by = a.integer("--make-vocab-size-divisible-by", 128, 1, kMaxSize);
  const bool unpadded = a.has("--padded-vocab-size") || a.flag("--no-pad-vocab-size") ||
                        a.flag("--disable-pad-vocab-size");
  // A builder that pads the vocab itself (Gemma 4's dense provider) pads it all the same.
  if (unpadded && m.vocab_padding_times_tp) {
    m.make_vocab_size_divisible_by = 1;  // the vocab is used as given
  }
  const std::int64_t configured_mtp = m.mtp_num_layers;
  if (!m.hybrid || configured_mtp == 0) {
    m.mtp_num_layers = a.integer("--mtp-num-layers", 0, 0, kMaxSize);
    if (configured_mtp > 0 && m.mtp_num_layers == 0) {
      notes.push_back(
          fmt::format("the model has {} multi-token prediction layer(s); "
                      "Megatron-LM builds them only with --mtp-num-layers",
                      configured_mtp));
    }
  } else {
    a.has("--mtp-num-layers");
  }
  if (m.mtp_num_layers > 0 && m.position_embedding == PositionEmbedding::learned_absolute) {
    a.fail("--mtp-num-layers",
           "needs rope or no position embeddings "
           "(--position-embedding-type rope)");
  }
  m.moe.grouped_gemm = a.flag("--moe-grouped-gemm");
  if (std::optional<std::string> softmax = a.string("--softmax-type")) {
    m.softmax_offset = *softmax == "learnable";
  }
}

}  // namespace paramlayout::job
