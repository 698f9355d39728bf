// Upstream references: Megatron-LM d98e8a64, megatron/core/tokenizers/.
#include "tokenizer_vocab.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <unordered_set>

#include "../format/json_reader.hpp"
#include "arg_map.hpp"

namespace paramlayout::job {
namespace {

using Tokens = std::unordered_set<std::string>;

std::int64_t with_extra(Tokens &tokens, const std::vector<std::string> &extra) {
  for (const std::string &t : extra) tokens.insert(t);
  return static_cast<std::int64_t>(tokens.size());
}

/// A protobuf varint at `pos`; false when the bytes end first.
bool varint(std::string_view s, std::size_t &pos, std::uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64 && pos < s.size(); shift += 7) {
    const auto byte = static_cast<std::uint8_t>(s[pos++]);
    value |= std::uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

/// Walks a protobuf message's fields: `on_field(number, bytes)` for each
/// length-delimited one, `on_varint(number, value)` for each varint; false when
/// the message is malformed.
template <class OnField, class OnVarint>
bool walk_message(std::string_view s, OnField on_field, OnVarint on_varint) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::uint64_t key = 0;
    if (!varint(s, pos, key)) return false;
    const std::uint64_t number = key >> 3;
    std::uint64_t length = 0;
    switch (key & 7) {
      case 0:
        if (!varint(s, pos, length)) return false;
        on_varint(number, length);
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2:
        if (!varint(s, pos, length) || length > s.size() - pos) return false;
        on_field(number, s.substr(pos, length));
        pos += length;
        break;
      default:
        return false;
    }
    if (pos > s.size()) return false;
  }
  return true;
}

}  // namespace

Result<std::int64_t> gpt2_vocab_size(std::string_view vocab_json, std::string_view source,
                                     const std::vector<std::string> &extra) {
  json::Reader r(source);
  if (!r.parse(vocab_json)) return r.error();
  if (!r.is_object(r.root(), {})) return r.error();
  Tokens tokens;
  for (auto [key, value] : simdjson::dom::object(r.root())) tokens.emplace(key);
  tokens.emplace("<|endoftext|>");
  return with_extra(tokens, extra);
}

Result<std::int64_t> hf_tokenizer_vocab_size(std::string_view tokenizer_json,
                                             std::string_view source,
                                             const std::vector<std::string> &extra) {
  json::Reader r(source);
  if (!r.parse(tokenizer_json)) return r.error();
  const json::Path root;
  if (!r.is_object(r.root(), root)) return r.error();
  Tokens tokens;
  simdjson::dom::element model;
  if (r.root()["model"].get(model) != simdjson::SUCCESS || !model.is_object()) {
    return Error{fmt::format("{}: no \"model\" object: not a Hugging Face tokenizer.json", source)};
  }
  simdjson::dom::element vocab;
  if (model["vocab"].get(vocab) != simdjson::SUCCESS) {
    return Error{fmt::format("{}: /model has no \"vocab\"", source)};
  }
  if (vocab.is_object()) {
    for (auto [key, value] : simdjson::dom::object(vocab)) tokens.emplace(key);
  } else if (vocab.is_array()) {  // Unigram: [[piece, score], ...]
    std::size_t i = 0;
    for (simdjson::dom::element entry : simdjson::dom::array(vocab)) {
      std::string_view piece;
      simdjson::dom::element first;
      if (!entry.is_array() || entry.at(0).get(first) != simdjson::SUCCESS ||
          first.get(piece) != simdjson::SUCCESS) {
        return Error{fmt::format("{}: /model/vocab/{}: expected [piece, score]", source, i)};
      }
      tokens.emplace(piece);
      ++i;
    }
  } else {
    return Error{fmt::format("{}: /model/vocab: expected an object or a list", source)};
  }
  simdjson::dom::element added;
  if (r.root()["added_tokens"].get(added) == simdjson::SUCCESS && added.is_array()) {
    for (simdjson::dom::element t : simdjson::dom::array(added)) {
      std::string_view content;
      if (t["content"].get(content) == simdjson::SUCCESS) tokens.emplace(content);
    }
  }
  return with_extra(tokens, extra);
}

namespace {

Result<nlohmann::json> json_object(std::string_view text, std::string_view source) {
  // nlohmann, not simdjson: transformers writes model_max_length as 1e30, an integer
  // simdjson cannot hold.
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_discarded() || !value.is_object()) {
    return Error{fmt::format("{}: not a JSON object", source)};
  }
  return value;
}

/// additional_special_tokens is read as extra_special_tokens where that is absent, and
/// dropped where it is there.
void fold_additional_tokens(nlohmann::json &config) {
  if (!config.contains("additional_special_tokens")) return;
  if (!config.contains("extra_special_tokens")) {
    config["extra_special_tokens"] = config["additional_special_tokens"];
  }
  config.erase("additional_special_tokens");
}

}  // namespace

Result<std::vector<std::string>> hf_config_tokens(const HfTokenizerConfig &files) {
  nlohmann::json merged = nlohmann::json::object();
  if (files.config) {
    Result<nlohmann::json> config = json_object(*files.config, files.config_source);
    if (!config) return config.error();
    merged = std::move(*config);
    fold_additional_tokens(merged);
  }
  // The map is read only where the config has no added_tokens_decoder; its keys replace the
  // config's, its extra_special_tokens list joins the config's.
  if (files.special_tokens_map && !merged.contains("added_tokens_decoder")) {
    Result<nlohmann::json> map = json_object(*files.special_tokens_map, files.map_source);
    if (!map) return map.error();
    for (auto &[key, value] : map->items()) {
      nlohmann::json &old = merged[key];
      if (key == "extra_special_tokens" && old.is_array() && value.is_array()) {
        old.insert(old.end(), value.begin(), value.end());
      } else {
        old = value;
      }
    }
  }
  fold_additional_tokens(merged);
  std::vector<std::string> tokens;
  const auto take = [&](const nlohmann::json &t) {  // a string, or an AddedToken's content
    const nlohmann::json &text = t.is_object() && t.contains("content") ? t["content"] : t;
    if (text.is_string()) tokens.push_back(text.get<std::string>());
  };
  for (const auto &[key, value] : merged.items()) {
    if (key == "extra_special_tokens" || key == "added_tokens_decoder") {
      if (value.is_structured()) {
        for (const nlohmann::json &t : value) take(t);  // a list, or a dict of named ones
      }
    } else if (key.ends_with("_token")) {
      take(value);
    }
  }
  return tokens;
}

Result<std::int64_t> sentencepiece_vocab_size(std::string_view model, std::string_view source,
                                              const std::vector<std::string> &extra) {
  // ModelProto (sentencepiece_model.proto): field 1, repeated SentencePiece {1:
  // piece, 2: score, 3: type (2 = UNKNOWN)}.
  Tokens known;  // pieces piece_to_id finds (the unknown piece maps to unk_id
                 // like a miss)
  std::int64_t count = 0;
  bool bad_piece = false;
  const auto ignore = [](std::uint64_t, auto) {};
  const bool ok = walk_message(
      model,
      [&](std::uint64_t number, std::string_view bytes) {
        if (number != 1) return;
        ++count;
        std::string piece;
        std::uint64_t type = 1;
        bad_piece |= !walk_message(
            bytes,
            [&](std::uint64_t field, std::string_view text) {
              if (field == 1) piece = text;
            },
            [&](std::uint64_t field, std::uint64_t value) {
              if (field == 3) type = value;
            });
        if (type != 2) known.insert(piece);
      },
      ignore);
  if (!ok || bad_piece || count == 0) {
    return Error{fmt::format("{}: not a SentencePiece model (no pieces read)", source)};
  }
  // sentencepiece_tokenizer.py:284-290: a token piece_to_id maps to unk_id is
  // added once.
  std::int64_t size = count;
  for (const std::string &t : extra) {
    if (known.insert(t).second) ++size;
  }
  return size;
}

Result<std::int64_t> tiktoken_rank_count(std::string_view text, std::string_view source) {
  json::Reader r(source);
  if (!r.parse(text)) return r.error();
  if (!r.is_array(r.root(), {})) return r.error();
  return static_cast<std::int64_t>(simdjson::dom::array(r.root()).size());
}

namespace {

constexpr std::int64_t kMaxSize = (std::int64_t{1} << 24) - 1;

/// Adds to `tokens` those the folder's tokenizer_config.json and special_tokens_map.json name;
/// false with `why` when one is there but unreadable.
bool add_hf_config_tokens(const std::string &folder, const FileReader &files,
                          std::vector<std::string> &tokens, std::string &why) {
  HfTokenizerConfig config{.config = files(folder + "/tokenizer_config.json"),
                           .config_source = folder + "/tokenizer_config.json",
                           .special_tokens_map = files(folder + "/special_tokens_map.json"),
                           .map_source = folder + "/special_tokens_map.json"};
  Result<std::vector<std::string>> named = hf_config_tokens(config);
  if (!named) {
    why = named.error().message;
    return false;
  }
  tokens.insert(tokens.end(), named->begin(), named->end());
  return true;
}

/// The vocabulary Megatron-LM's tokenizer reports for the line's
/// --tokenizer-type, from the files it names (build_tokenizer.py); nullopt with
/// a reason when it cannot be known here.
std::optional<std::int64_t> tokenizer_vocab(ArgMap &a, const FileReader &files, std::string &why) {
  const std::optional<std::string> type = a.string("--tokenizer-type");
  const std::vector<std::string> extra =
      a.values("--tokenizer-special-tokens").value_or(std::vector<std::string>{});
  const std::optional<std::int64_t> vocab_size = a.maybe_integer("--vocab-size", 1, kMaxSize);
  const auto read = [&](std::string_view name, const std::optional<std::string> &path,
                        std::string_view what) -> std::optional<std::string> {
    if (!path) {
      why = fmt::format("{} names no {} ({})", *type, what, name);
      return std::nullopt;
    }
    std::optional<std::string> text = files ? files(*path) : std::nullopt;
    if (!text) why = fmt::format("{} {} is not here to read", name, *path);
    return text;
  };
  const auto take = [&](Result<std::int64_t> size) -> std::optional<std::int64_t> {
    if (!size) {
      why = size.error().message;
      a.fail("--tokenizer-type", size.error().message);
      return std::nullopt;
    }
    return *size;
  };
  if (!type) {
    why = "the line names no --tokenizer-type";
    return std::nullopt;
  }
  if (*type == "GPT2BPETokenizer") {
    a.has("--merge-file");
    const std::optional<std::string> path = a.string("--vocab-file");
    if (std::optional<std::string> text = read("--vocab-file", path, "vocab.json")) {
      return take(gpt2_vocab_size(*text, *path, extra));
    }
    return std::nullopt;
  }
  if (*type == "SentencePieceTokenizer" || *type == "GPTSentencePieceTokenizer" ||
      *type == "Llama2Tokenizer") {
    const bool legacy = a.flag("--tokenizer-sentencepiece-legacy");
    if (!extra.empty() && !legacy) {
      a.fail("--tokenizer-special-tokens",
             "must be absent without "
             "--tokenizer-sentencepiece-legacy "
             "(sentencepiece_tokenizer.py:79)");
      return std::nullopt;
    }
    const std::optional<std::string> path = a.string("--tokenizer-model");
    if (std::optional<std::string> bytes = read("--tokenizer-model", path, "model file")) {
      return take(sentencepiece_vocab_size(*bytes, *path, extra));
    }
    return std::nullopt;
  }
  if (*type == "HuggingFaceTokenizer") {
    const std::optional<std::string> path = a.string("--tokenizer-model");
    if (!path) {
      why = "HuggingFaceTokenizer names no tokenizer (--tokenizer-model)";
      return std::nullopt;
    }
    std::optional<std::string> text = files ? files(*path + "/tokenizer.json") : std::nullopt;
    std::string source = *path + "/tokenizer.json";
    std::vector<std::string> tokens = extra;
    if (text) {
      if (!add_hf_config_tokens(*path, files, tokens, why)) {
        a.fail("--tokenizer-model", why);
        return std::nullopt;
      }
    } else if (files) {
      text = files(*path);
      source = *path;
    }
    if (!text) {
      why = fmt::format(
          "--tokenizer-model {} is not a tokenizer.json or a "
          "folder holding one "
          "here (a Hub name is read only by Megatron-LM)",
          *path);
      return std::nullopt;
    }
    return take(hf_tokenizer_vocab_size(*text, source, tokens));
  }
  if (*type == "TikTokenizer") {
    // tiktoken_tokenizer.py:86-156: --vocab-size (default 2^17) ids, the first
    // --tiktoken-num-special-tokens of them special, the rest the file's first
    // ranks.
    const std::int64_t size = vocab_size.value_or(std::int64_t{1} << 17);
    const std::int64_t special = a.integer("--tiktoken-num-special-tokens", 1000, 0, kMaxSize);
    const std::int64_t named = extra.empty() ? 7 : static_cast<std::int64_t>(extra.size());
    if (!(named <= special && special < size)) {
      a.fail("--tiktoken-num-special-tokens",
             fmt::format("needs {} special tokens <= {} < the vocab size {} "
                         "(tiktoken_tokenizer.py:114)",
                         named, special, size));
      return std::nullopt;
    }
    const std::optional<std::string> path = a.string("--tokenizer-model");
    if (std::optional<std::string> text = path && files ? files(*path) : std::nullopt) {
      const std::optional<std::int64_t> ranks = take(tiktoken_rank_count(*text, *path));
      if (!ranks) return std::nullopt;
      if (*ranks < size - special) {
        a.fail("--vocab-size", fmt::format("{} needs {} ranks after the {} special tokens; {} "
                                           "holds {} (tiktoken_tokenizer.py:156)",
                                           size, size - special, special, *path, *ranks));
        return std::nullopt;
      }
    }
    return size;
  }
  if (*type == "NullTokenizer") {
    if (!vocab_size) why = "NullTokenizer takes its vocabulary from --vocab-size";
    return vocab_size;  // null_tokenizer.py:18
  }
  why = fmt::format("paramlayout does not read {}'s files", *type);
  return std::nullopt;
}

}  // namespace

void read_vocab_args(ArgMap &a, ModelSpec &m, const FileReader &files,
                     std::vector<std::string> &notes) {
  const std::optional<std::int64_t> padded = a.maybe_integer("--padded-vocab-size", 1, kMaxSize);
  std::string why;
  const std::optional<std::int64_t> from_tokenizer = tokenizer_vocab(a, files, why);
  const std::optional<std::int64_t> vocab = a.maybe_integer("--vocab-size", 1, kMaxSize);
  if (a.failed()) return;
  if (padded) {
    m.vocab_size = *padded;
  } else if (from_tokenizer) {
    m.vocab_size = *from_tokenizer;
    if (vocab && *vocab != *from_tokenizer) {
      notes.push_back(
          fmt::format("the tokenizer's vocabulary is {} tokens; Megatron-LM pads "
                      "that, not --vocab-size {}",
                      *from_tokenizer, *vocab));
    }
  } else if (vocab) {
    m.vocab_size = *vocab;
    if (!why.empty() && a.has("--tokenizer-type")) {
      notes.push_back(fmt::format("vocabulary from --vocab-size {}: {}", *vocab, why));
    }
  } else {
    a.fail("--vocab-size", fmt::format("is required: {}; give the tokenizer's files, "
                                       "--vocab-size or --hf-config",
                                       why));
  }
}

}  // namespace paramlayout::job
