// Megatron-LM's own layout functions computed testdata/reference/expected; every case must
// come out identical in the contract fields, through the JSON the tool writes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "paramlayout/layout_json.hpp"
#include "paramlayout/plan.hpp"
#include "reference_cases.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;

namespace {

// The first place two contract values differ, as a JSON pointer, or "".
std::string first_difference(const json& got, const json& want, const std::string& at = "") {
  if (got.type() != want.type()) return at;
  if (got.is_object()) {
    for (const auto& [key, value] : want.items()) {
      if (!got.contains(key)) return at + "/" + key;
      std::string d = first_difference(got[key], value, at + "/" + key);
      if (!d.empty()) return d;
    }
    return "";
  }
  if (got.is_array()) {
    if (got.size() != want.size()) return at + " (length)";
    for (std::size_t i = 0; i < got.size(); ++i) {
      std::string d = first_difference(got[i], want[i], at + "/" + std::to_string(i));
      if (!d.empty()) return d;
    }
    return "";
  }
  return got == want ? "" : at;
}

}  // namespace

TEST_SUITE("reference") {
  TEST_CASE("all Megatron-LM reference layouts are reproduced exactly") {
    const std::string root = source_path("testdata/reference/");
    const json cases = json::parse(read_text(root + "cases.json"));
    REQUIRE(cases.size() == 144);
    int identical = 0;
    for (const json& c : cases) {
      const std::string id = c.at("id").get<std::string>();
      CAPTURE(id);
      const std::string manifest_path = root + c.at("manifest").get<std::string>();
      const Manifest m = expect_ok(parse_manifest(read_text(manifest_path), manifest_path));
      const Layout layout =
          expect_ok(plan(m, paramlayout::test::reference_options(c.at("options"))));
      const json got = json::parse(write_layout_json(layout));
      const json want = json::parse(read_text(root + "expected/" + id + ".json"));

      json contract = {{"buffers", json::array()}};
      for (const json& b : got.at("buffers")) {
        json kept;
        for (const char* key : {"param_dtype", "grad_dtype", "expert_parallel", "layerwise",
                                "num_shards", "numel", "numel_unpadded", "buckets", "params"}) {
          kept[key] = b.at(key);
        }
        contract["buffers"].push_back(kept);
      }
      const std::string diff = first_difference(contract, want);
      CHECK_MESSAGE(diff.empty(), id, " differs at ", diff);
      if (diff.empty() && contract == want) ++identical;
    }
    CHECK(identical == 144);
  }
}
