// The vocabulary size Megatron-LM's tokenizers report
// (megatron/core/tokenizers/), read from the tokenizer files a launch line
// names, before Megatron-LM pads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arg_map.hpp"
#include "paramlayout/error.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/model.hpp"

namespace paramlayout::job {

/// GPT2BPETokenizer: the tokens of the GPT-2 `vocab.json` (an object of token
/// -> id), with
/// `<|endoftext|>` and the `extra` special tokens added where absent (Hugging
/// Face's GPT2TokenizerFast, len(tokenizer)).
Result<std::int64_t> gpt2_vocab_size(std::string_view vocab_json, std::string_view source,
                                     const std::vector<std::string> &extra);

/// A Hugging Face `tokenizer.json`: the distinct tokens of its model's
/// vocabulary (BPE, WordPiece, WordLevel: an object; Unigram: a list of [piece,
/// score]) and its `added_tokens`, with the `extra` special tokens added where
/// absent (len(tokenizer)).
Result<std::int64_t> hf_tokenizer_vocab_size(std::string_view tokenizer_json,
                                             std::string_view source,
                                             const std::vector<std::string> &extra);

/// A Hugging Face tokenizer folder's configs, where present.
struct HfTokenizerConfig {
  std::optional<std::string> config;  ///< tokenizer_config.json
  std::string config_source;
  std::optional<std::string> special_tokens_map;  ///< special_tokens_map.json
  std::string map_source;
};

/// The tokens transformers adds from a folder's configs when it loads it
/// (tokenization_utils_base.py, from_pretrained and __init__): the named special tokens
/// (`bos_token` ... `mask_token`, and any other `*_token` string), `extra_special_tokens` (a
/// list, or a dict of named ones; `additional_special_tokens` where it is absent) and the
/// contents of `added_tokens_decoder`; special_tokens_map.json's keys replace the config's,
/// where the config has no `added_tokens_decoder`.
Result<std::vector<std::string>> hf_config_tokens(const HfTokenizerConfig &files);

/// A SentencePiece `.model` (a ModelProto): its pieces (get_piece_size()), with
/// the `extra` special tokens that are not pieces added (the legacy wrapper's
/// add_special_tokens).
Result<std::int64_t> sentencepiece_vocab_size(std::string_view model, std::string_view source,
                                              const std::vector<std::string> &extra);

/// Megatron-LM's tiktoken JSON (a list of {rank, token_bytes, token_str}): how
/// many ranks it holds; TikTokenizer needs at least vocab size - special tokens
/// of them.
Result<std::int64_t> tiktoken_rank_count(std::string_view json, std::string_view source);

/// The model's vocabulary from a launch line: --padded-vocab-size, else what
/// the
/// --tokenizer-type's files (read with `files`) give, else --vocab-size;
/// refused, saying what would settle it, when none does. `notes` gets where it
/// came from when that is not plain.
void read_vocab_args(ArgMap &args, ModelSpec &model, const FileReader &files,
                     std::vector<std::string> &notes);

}  // namespace paramlayout::job
