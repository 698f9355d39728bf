// Reading manifests: values, defaults, and errors that locate the problem.
#include <doctest/doctest.h>

#include "paramlayout/manifest.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

std::string error_of(std::string_view text) {
  Result<Manifest> m = parse_manifest(text, "m.json");
  REQUIRE_FALSE(m.ok());
  return m.error().message;
}

}  // namespace

TEST_SUITE("manifest") {
  TEST_CASE("fields, defaults and numel") {
    const Manifest m = expect_ok(parse_manifest(R"({
      "schema": "paramlayout.manifest/v1", "model": "tiny", "future_key": [1, 2],
      "params": [
        {"name": "w", "shape": [3, 5], "dtype": "bfloat16"},
        {"name": "s", "shape": [], "dtype": "float32", "storage": "fp8", "expert_parallel": true,
         "shared_embedding": true, "embedding_or_output": true, "use_muon": false,
         "gtp_remat_size": 4, "comment": "ignored"}
      ]})",
                                                "m.json"));
    CHECK(m.model == "tiny");
    CHECK(m.source == "m.json");
    REQUIRE(m.params.size() == 2);
    const Param& w = m.params[0];
    CHECK(w.name == "w");
    CHECK(w.shape == std::vector<std::int64_t>{3, 5});
    CHECK(w.numel == 15);
    CHECK(w.dtype == DType::bfloat16);
    CHECK(w.storage == Storage::dense);
    CHECK_FALSE(w.expert_parallel);
    CHECK_FALSE(w.shared_embedding);
    CHECK_FALSE(w.embedding_or_output);
    CHECK(w.use_muon);
    CHECK(w.gtp_remat_size == 1);
    const Param& s = m.params[1];
    CHECK(s.numel == 1);
    CHECK(s.storage == Storage::fp8);
    CHECK(s.expert_parallel);
    CHECK(s.shared_embedding);
    CHECK(s.embedding_or_output);
    CHECK_FALSE(s.use_muon);
    CHECK(s.gtp_remat_size == 4);
  }

  TEST_CASE("sha256 is of the exact bytes") {
    // FIPS 180-2 test vector.
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string text = R"({"schema": "paramlayout.manifest/v1", "params": []})";
    CHECK(expect_ok(parse_manifest(text, "m.json")).sha256 == sha256_hex(text));
  }

  TEST_CASE("minor versions are read, other majors are not") {
    CHECK(parse_manifest(R"({"schema": "paramlayout.manifest/v1.3", "params": []})", "m.json"));
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v12", "params": []})") ==
          "m.json: /schema: unsupported version \"paramlayout.manifest/v12\": this paramlayout "
          "reads paramlayout.manifest/v1");
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1.x", "params": []})") ==
          "m.json: /schema: expected \"paramlayout.manifest/v1\", got "
          "\"paramlayout.manifest/v1.x\"");
  }

  TEST_CASE("the schema id is checked before anything else") {
    CHECK(error_of(R"({"params": [{"name": 1}], "schema": "paramlayout.layout/v1"})") ==
          "m.json: /schema: expected \"paramlayout.manifest/v1\", got "
          "\"paramlayout.layout/v1\" (this file is a layout, not a manifest)");
  }

  TEST_CASE("errors name the JSON pointer and what was expected") {
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a", "shape": [2], "dtype": "float32"},
            {"name": "b", "shape": [3, -4], "dtype": "float32"}]})") ==
          "m.json: /params/1/shape/1: expected an integer >= 1, got -4");
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a/b~c", "shape": [2], "dtype": "float32", "use_muon": "no"}]})") ==
          "m.json: /params/0/use_muon: expected true or false, got \"no\"");
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a", "shape": [2]}]})") ==
          "m.json: /params/0: missing required key \"dtype\"");
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a", "shape": [2], "dtype": "float32"},
            {"name": "a", "shape": [2], "dtype": "float32"}]})") ==
          "m.json: /params/1/name: duplicate param name \"a\" (first at /params/0)");
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a", "shape": [3037000500, 3037000500], "dtype": "float32"}]})") ==
          "m.json: /params/0/shape: numel (the product of the dims [3037000500, 3037000500]) "
          "does not fit in 64 bits");
  }

  TEST_CASE("a long value is shortened in messages") {
    const std::string name(200, 'x');
    const std::string message = error_of(R"({"schema": "paramlayout.manifest/v1", "params": [
            {"name": "a", "shape": [2], "dtype": ")" +
                                         name + R"("}]})");
    CHECK(message.size() < 160);
    CHECK(message.find("...") != std::string::npos);
  }

  TEST_CASE("syntax errors carry line and column") {
    CHECK(error_of("{\n  \"schema\": \"paramlayout.manifest/v1\",\n  \"params\": [1,]\n}") ==
          "m.json: line 3, column 16: syntax error while parsing value - unexpected ']'; "
          "expected '[', '{', or a literal");
  }

  TEST_CASE("numel at the edge of 64 bits is accepted") {
    const Manifest m = expect_ok(parse_manifest(R"({"schema": "paramlayout.manifest/v1",
        "params": [{"name": "a", "shape": [9223372036854775807], "dtype": "float32"}]})",
                                                "m.json"));
    CHECK(m.params[0].numel == INT64_MAX);
  }
}
