// Layout JSON: what is written reads back the same, and a bad layout file is located.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "paramlayout/layout_json.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;

namespace {

Layout llama_layout(Strategy strategy) {
  const Manifest m = expect_ok(parse_manifest(
      read_text(source_path("testdata/manifests/llama3-8b.json")), "llama3-8b.json"));
  PlanOptions o;
  o.strategy = strategy;
  o.dp = o.expert_dp = 8;
  o.bucket_size = ddp_fallback_bucket_size(8);
  return expect_ok(plan(m, o));
}

std::string error_of(std::string_view text) {
  Result<Layout> l = parse_layout(text, "l.json");
  REQUIRE_FALSE(l.ok());
  return l.error().message;
}

}  // namespace

TEST_SUITE("layout-json") {
  TEST_CASE("a written layout reads back field for field") {
    for (Strategy s : {Strategy::unpadded, Strategy::sequential_dp, Strategy::layerwise}) {
      const Layout original = llama_layout(s);
      const Layout back = expect_ok(parse_layout(write_layout_json(original), "l.json"));
      CHECK(back.generator == original.generator);
      CHECK(back.model == original.model);
      CHECK(back.manifest_sha256 == original.manifest_sha256);
      CHECK(back.options == original.options);
      REQUIRE(back.buffers.size() == original.buffers.size());
      for (std::size_t i = 0; i < back.buffers.size(); ++i) {
        const BufferLayout& a = original.buffers[i];
        const BufferLayout& b = back.buffers[i];
        CHECK(a.key == b.key);
        CHECK(a.strategy == b.strategy);
        CHECK(a.num_shards == b.num_shards);
        CHECK(a.numel == b.numel);
        CHECK(a.numel_unpadded == b.numel_unpadded);
        CHECK(a.buckets == b.buckets);
        CHECK(a.params == b.params);
      }
    }
  }

  TEST_CASE("a quantized buffer's param_buffer reads back, and a short one is refused") {
    const Manifest m = expect_ok(parse_manifest(
        R"({"schema": "paramlayout.manifest/v1", "params": [
             {"name": "a", "shape": [64, 96], "dtype": "bfloat16", "storage": "nvfp4"},
             {"name": "b", "shape": [64, 64], "dtype": "bfloat16"},
             {"name": "c", "shape": [32, 64], "dtype": "float16", "storage": "mxfp8"}]})",
        "m.json"));
    PlanOptions o;
    o.dp = o.expert_dp = 4;
    const Layout original = expect_ok(plan(m, o));
    const std::string text = write_layout_json(original);
    const Layout back = expect_ok(parse_layout(text, "l.json"));
    REQUIRE(back.buffers.size() == 3);
    for (std::size_t i = 0; i < back.buffers.size(); ++i) {
      CHECK(back.buffers[i].param_buffer == original.buffers[i].param_buffer);
    }
    CHECK(back.buffers[0].param_buffer.packed);
    CHECK(back.buffers[2].param_buffer.in_grad_buffer);
    nlohmann::json j = nlohmann::json::parse(text);
    j["buffers"][0]["param_buffer"]["params"] = nlohmann::json::array();
    CHECK(error_of(j.dump()).find("expected 1 [start, end] pairs, one per param, got 0") !=
          std::string::npos);
  }

  TEST_CASE("names are escaped so any string survives") {
    Layout l;
    l.generator = "g";
    l.manifest_sha256 = "s";
    BufferLayout& b = l.buffers.emplace_back();
    b.params.push_back({l.names->add("quote\" back\\slash\ttab\x01 ünï"), 0, 1, 0, 0});
    const std::string text = write_layout_json(l);
    CHECK(nlohmann::json::parse(text)["buffers"][0]["params"][0]["name"] ==
          "quote\" back\\slash\ttab\x01 ünï");
    CHECK(expect_ok(parse_layout(text, "l.json")).buffers[0].params[0].name == b.params[0].name);
  }

  TEST_CASE("one line per param and per bucket, for readable text diffs") {
    const std::string text = write_layout_json(llama_layout(Strategy::sequential_dp));
    const auto lines = std::count(text.begin(), text.end(), '\n');
    CHECK(lines > 195 + 98);
    CHECK(lines < 195 + 98 + 30);
  }

  TEST_CASE("bad layout files are located") {
    CHECK(error_of(R"({"schema": "paramlayout.manifest/v1"})") ==
          "l.json: /schema: expected \"paramlayout.layout/v1\", got "
          "\"paramlayout.manifest/v1\" (this file is a manifest, not a layout)");
    CHECK(error_of(R"({"schema": "paramlayout.layout/v1", "manifest_sha256": "x",
                      "options": {"strategy": "layerwise", "dp": 0, "bucket_size": null},
                      "buffers": []})") ==
          "l.json: /options/dp: expected an integer in [1, 1048576], got 0");
    CHECK(error_of(R"({"schema": "paramlayout.layout/v1", "manifest_sha256": "x",
                      "options": {"strategy": "layerwise", "dp": 2, "bucket_size": null},
                      "buffers": [{"param_dtype": "int8"}]})") ==
          "l.json: /buffers/0/param_dtype: expected one of \"float32\", \"bfloat16\", "
          "\"float16\", \"uint8\", got \"int8\"");
    CHECK(error_of(R"({"schema": "paramlayout.layout/v1", "manifest_sha256": "x",
                      "options": {"strategy": "layerwise", "dp": 2, "bucket_size": null}})") ==
          "l.json: missing required key \"buffers\"");
  }
}
