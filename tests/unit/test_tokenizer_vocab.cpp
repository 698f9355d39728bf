// job: the vocabulary of small crafted tokenizer files whose sizes are known by
// construction, counted as Megatron-LM's tokenizers count them
// (megatron/core/tokenizers/ at d98e8a64), then padded as Megatron-LM pads it
// (vocab_utils.py: a multiple of
// --make-vocab-size-divisible-by x tp).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>

#include "job/tokenizer_vocab.hpp"
#include "paramlayout/megatron_args.hpp"
#include "paramlayout/model_chunk.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using namespace paramlayout::job;
using paramlayout::test::Args;
using paramlayout::test::expect_ok;
using paramlayout::test::operator+;

namespace {

/// A protobuf length-delimited field.
std::string field(int number, const std::string &bytes) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  out += static_cast<char>(bytes.size());  // every crafted field is under 128 bytes
  return out + bytes;
}

/// A SentencePiece piece {1: text, 3: type} (type 1 normal, 2 unknown, 3
/// control).
std::string piece(const std::string &text, int type) {
  return field(1, text) + std::string{0x18, static_cast<char>(type)};
}

/// A ModelProto with these pieces, and a trainer_spec (field 2) to skip.
std::string sentencepiece_model(const std::vector<std::pair<std::string, int>> &pieces) {
  std::string out;
  for (const auto &[text, type] : pieces) out += field(1, piece(text, type));
  return out + field(2, std::string{0x08, 0x05});
}

std::string tiktoken_json(int ranks) {
  std::string out = "[";
  for (int i = 0; i < ranks; ++i) {
    out += fmt::format("{}{{\"rank\": {}, \"token_bytes\": \"AA==\", \"token_str\": \"x\"}}",
                       i ? "," : "", i);
  }
  return out + "]";
}

Args small_model() { return test::small_gpt_args(2); }

/// The job's vocabulary with these files readable.
Result<JobSpec> with_files(const Args &args, std::map<std::string, std::string> files) {
  const FileReader reader = [files](const std::string &path) -> std::optional<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
  return job_from_megatron_args(small_model() + args, 1, nullptr, reader);
}

}  // namespace

TEST_SUITE("job-tokenizer") {
  TEST_CASE("GPT-2 vocab.json: its tokens, <|endoftext|> and new special tokens") {
    CHECK(expect_ok(gpt2_vocab_size(R"({"a": 0, "b": 1, "<|endoftext|>": 2})", "v", {})) == 3);
    CHECK(expect_ok(gpt2_vocab_size(R"({"a": 0, "b": 1})", "v", {})) == 3);
    CHECK(expect_ok(gpt2_vocab_size(R"({"a": 0})", "v", {"<x>", "a", "<x>"})) == 3);
    CHECK_FALSE(gpt2_vocab_size("[1, 2]", "v", {}));
  }

  TEST_CASE(
      "tokenizer.json: the model's vocabulary and the added tokens, once "
      "each") {
    const std::string bpe = R"({"added_tokens": [{"id": 3, "content": "<s>"},
        {"id": 0, "content": "a"}], "model": {"type": "BPE", "vocab": {"a": 0, "b": 1,
        "c": 2}, "merges": []}})";
    CHECK(expect_ok(hf_tokenizer_vocab_size(bpe, "t", {})) == 4);
    CHECK(expect_ok(hf_tokenizer_vocab_size(bpe, "t", {"<pad>"})) == 5);
    const std::string unigram =
        R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["x", -1.5]]}})";
    CHECK(expect_ok(hf_tokenizer_vocab_size(unigram, "t", {})) == 2);
    CHECK_FALSE(hf_tokenizer_vocab_size(R"({"version": "1.0"})", "t", {}));
  }

  TEST_CASE(
      "SentencePiece .model: its pieces, and legacy special tokens it "
      "does not know") {
    const std::string model =
        sentencepiece_model({{"<unk>", 2}, {"<s>", 3}, {"</s>", 3}, {"a", 1}, {"b", 1}});
    CHECK(expect_ok(sentencepiece_vocab_size(model, "m", {})) == 5);
    // piece_to_id maps "<unk>" and "<new>" to unk_id, so both are added; "a" is
    // a piece.
    CHECK(expect_ok(sentencepiece_vocab_size(model, "m", {"<unk>", "<new>", "a", "<new>"})) == 7);
    CHECK_FALSE(sentencepiece_vocab_size("not a model", "m", {}));
  }

  TEST_CASE("a tokenizer folder's configs add the special tokens transformers adds") {
    const std::string tokenizer = R"({"model": {"vocab": {"a": 0, "<s>": 1}}})";
    const auto size = [&](std::map<std::string, std::string> files) {
      files["dir/tokenizer.json"] = tokenizer;
      return expect_ok(with_files(
                           {"--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", "dir"},
                           files))
          .model.vocab_size;
    };
    CHECK(size({}) == 2);
    // model_max_length as transformers writes it: 1e30, past any 64-bit integer.
    CHECK(size({{"dir/tokenizer_config.json",
                 R"({"model_max_length": 1000000000000000019884624838656, "bos_token": "<s>",
                     "pad_token": {"content": "<pad>"}, "image_token": "<img>",
                     "add_bos_token": true, "added_tokens_decoder": {"9": {"content": "<d>"}}})"}}) ==
          5);
    // additional_special_tokens counts only where extra_special_tokens is absent.
    CHECK(size({{"dir/tokenizer_config.json",
                 R"({"additional_special_tokens": ["<x>", "<y>"]})"}}) == 4);
    CHECK(
        size(
            {{"dir/tokenizer_config.json",
              R"({"additional_special_tokens": ["<x>"], "extra_special_tokens": {"v": "<v>"}})"}}) ==
        3);
    // The map's keys replace the config's; a decoder in the config leaves the map unread.
    CHECK(size({{"dir/tokenizer_config.json", R"({"pad_token": "<p1>"})"},
                {"dir/special_tokens_map.json",
                 R"({"pad_token": "<p2>", "mask_token": "<m>"})"}}) == 4);
    CHECK(size({{"dir/tokenizer_config.json", R"({"added_tokens_decoder": {}})"},
                {"dir/special_tokens_map.json", R"({"mask_token": "<m>"})"}}) == 2);
    const Result<JobSpec> bad =
        with_files({"--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", "dir"},
                   {{"dir/tokenizer.json", tokenizer}, {"dir/tokenizer_config.json", "[1]"}});
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("dir/tokenizer_config.json: not a JSON object") !=
          std::string::npos);
  }

  TEST_CASE(
      "a launch line's tokenizer files give the vocabulary, then "
      "Megatron-LM pads it") {
    const std::string vocab = R"({"a": 0, "b": 1, "<|endoftext|>": 2})";
    // 3 tokens padded to a multiple of 128 x tp 1.
    JobSpec j = expect_ok(with_files({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
                                      "vocab.json", "--merge-file", "merges.txt"},
                                     {{"vocab.json", vocab}}));
    CHECK(j.model.vocab_size == 3);
    CHECK(padded_vocab_size(j.model, 1) == 128);
    CHECK(padded_vocab_size(j.model, 4) == 512);
    // Megatron-LM uses the tokenizer's count, not --vocab-size, with a
    // file-based tokenizer.
    j = expect_ok(with_files({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "vocab.json",
                              "--vocab-size", "1000"},
                             {{"vocab.json", vocab}}));
    CHECK(j.model.vocab_size == 3);
    const std::string model = sentencepiece_model({{"<unk>", 2}, {"a", 1}});
    j = expect_ok(
        with_files({"--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "t.model"},
                   {{"t.model", model}}));
    CHECK(j.model.vocab_size == 2);
    j = expect_ok(
        with_files({"--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", "dir"},
                   {{"dir/tokenizer.json", R"({"model": {"vocab": {"a": 0}}})"}}));
    CHECK(j.model.vocab_size == 1);
    // TikTokenizer: --vocab-size ids (2^17 by default), the first 1000 special.
    j = expect_ok(with_files(
        {"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "t.json", "--vocab-size", "1010"},
        {{"t.json", tiktoken_json(10)}}));
    CHECK(j.model.vocab_size == 1010);
    Result<JobSpec> short_file = with_files(
        {"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "t.json", "--vocab-size", "1010"},
        {{"t.json", tiktoken_json(9)}});
    REQUIRE_FALSE(short_file);
    CHECK(short_file.error().message.find("needs 10 ranks") != std::string::npos);
  }

  TEST_CASE("without the files, the refusal says what would settle the vocabulary") {
    Result<JobSpec> r = with_files(
        {"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "/nowhere/vocab.json"}, {});
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "--vocab-size: is required: --vocab-file /nowhere/vocab.json is "
          "not here to read; give the tokenizer's files, --vocab-size or "
          "--hf-config");
    r = with_files({"--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                    "meta-llama/Llama-3.1-8B"},
                   {});
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("a Hub name is read only by Megatron-LM") != std::string::npos);
    // With --vocab-size, a Hub tokenizer's line plans, and says where the
    // vocabulary came from.
    const JobSpec j =
        expect_ok(with_files({"--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                              "meta-llama/Llama-3.1-8B", "--vocab-size", "128256"},
                             {}));
    CHECK(j.model.vocab_size == 128256);
  }
}
