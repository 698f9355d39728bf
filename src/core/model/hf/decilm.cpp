// Llama-Nemotron (DeciLM, "nemotron-nas"): a heterogeneous Llama whose `block_configs` give
// each layer its own attention (grouped-query, a single linear layer, or none) and MLP
// (gated, a single linear layer, or none), as Megatron-LM's heterogeneous layer specs and
// Megatron-Bridge's llama_nemotron bridge read them.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "mappers.hpp"

namespace paramlayout::hf {
namespace {

/// One block's attention or MLP part.
struct Part {
  bool no_op = false;
  bool replace_with_linear = false;
};

class BlockReader {
 public:
  explicit BlockReader(json::Reader& reader) : reader_(reader) {}

  /// The member `key` of `object`, or nullopt when absent or null.
  std::optional<json::Element> member(json::Element object, std::string_view key) {
    auto value = object.at_key(key);
    if (value.error() || value.value().is_null()) return std::nullopt;
    return value.value();
  }

  Part part(json::Element object, const json::Path& path) {
    Part p;
    if (auto e = member(object, "no_op")) p.no_op = reader_.boolean(*e, path.field("no_op"));
    if (auto e = member(object, "replace_with_linear")) {
      p.replace_with_linear = reader_.boolean(*e, path.field("replace_with_linear"));
    }
    return p;
  }

  std::optional<std::int64_t> integer(json::Element object, const json::Path& path,
                                      std::string_view key) {
    auto e = member(object, key);
    if (!e) return std::nullopt;
    return reader_.integer(*e, path.field(key), 1, kMaxDimension);
  }

  /// Megatron-LM's MLPConfig.ffn_mult_to_intermediate_size: int(2 x mult x hidden / 3)
  /// rounded up to a multiple of 256.
  std::optional<std::int64_t> ffn_from_mult(json::Element object, const json::Path& path,
                                            std::int64_t hidden) {
    auto e = member(object, "ffn_mult");
    if (!e) return std::nullopt;
    double mult = 0;
    const json::Path at = path.field("ffn_mult");
    if (e->get(mult) != simdjson::SUCCESS || !(mult > 0) || !(mult < 1e6)) {
      reader_.expected(at, "a number > 0", *e);
      return std::nullopt;
    }
    const auto size = static_cast<std::int64_t>(2 * mult * static_cast<double>(hidden) / 3);
    return (size + 255) / 256 * 256;
  }

  json::Reader& reader() { return reader_; }

 private:
  json::Reader& reader_;
};

}  // namespace

void map_decilm(Config& c, ModelSpec& m, Notes& notes) {
  read_llama_like(c, m);
  read_biases(c, m, notes);
  const bool no_intermediate = c.is_null("intermediate_size");
  m.ffn_hidden_size = no_intermediate ? 0 : c.integer("intermediate_size", 0, 1);
  const std::optional<json::Element> blocks = c.find("block_configs");
  const json::Path root;
  const json::Path path = root.field("block_configs");
  json::Reader& reader = c.reader();
  if (!blocks) {
    c.fail("block_configs", "is required: it gives each layer's attention and MLP");
    return;
  }
  if (!reader.is_array(*blocks, path)) return;
  const simdjson::dom::array list(*blocks);
  if (list.size() != m.layers.size()) {
    c.fail("block_configs",
           fmt::format("has {} blocks, and num_hidden_layers is {}", list.size(), m.layers.size()));
    return;
  }
  BlockReader read(reader);
  std::size_t i = 0;
  for (json::Element block : list) {
    const bool first = i == 0;
    const json::Path at = path.item(i);
    if (!reader.is_object(block, at)) return;
    LayerSpec& layer = m.layers[i++];
    const auto attention = read.member(block, "attention");
    const json::Path attention_at = at.field("attention");
    if (!attention || !reader.is_object(*attention, attention_at)) {
      if (!attention) reader.fail(at, "missing required key \"attention\"");
      return;
    }
    const Part a = read.part(*attention, attention_at);
    layer.mixer = a.no_op ? Mixer::none : a.replace_with_linear ? Mixer::linear : Mixer::attention;
    std::optional<std::int64_t> groups = read.integer(*attention, attention_at, "num_query_groups");
    if (auto per_group = read.integer(*attention, attention_at, "n_heads_in_group")) {
      if (m.num_attention_heads % *per_group != 0) {
        reader.fail(attention_at.field("n_heads_in_group"),
                    fmt::format("{} does not divide num_attention_heads {}", *per_group,
                                m.num_attention_heads));
        return;
      }
      groups = m.num_attention_heads / *per_group;
    }
    // The model's key/value heads are the first block's, as Megatron-Bridge sets them.
    if (groups && first) m.num_query_groups = *groups;
    if (groups && layer.mixer == Mixer::attention) layer.num_query_groups = *groups;

    const json::Path ffn_at = at.field("ffn");
    const auto ffn = read.member(block, "ffn");
    if (!ffn || !reader.is_object(*ffn, ffn_at)) {
      if (!ffn) reader.fail(at, "missing required key \"ffn\"");
      return;
    }
    const Part f = read.part(*ffn, ffn_at);
    layer.mlp = f.no_op ? Mlp::none : f.replace_with_linear ? Mlp::linear : Mlp::dense;
    std::optional<std::int64_t> size = read.integer(*ffn, ffn_at, "ffn_hidden_size");
    if (!size) size = read.ffn_from_mult(*ffn, ffn_at, m.hidden_size);
    if (size && layer.mlp == Mlp::dense) layer.ffn_hidden_size = *size;
    if (!size && layer.mlp == Mlp::dense && m.ffn_hidden_size == 0) {
      reader.fail(ffn_at, "missing \"ffn_mult\" (and intermediate_size is null)");
      return;
    }
    if (reader.failed()) return;
  }
}

}  // namespace paramlayout::hf
