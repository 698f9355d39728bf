// diff: the lists it makes, and the count of optimizer-state elements that change owner
// against a brute-force count element by element.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "paramlayout/diff.hpp"
#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using nlohmann::json;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::source_path;

namespace {

Manifest load(const std::string& relative) {
  const std::string path = source_path(relative);
  return expect_ok(parse_manifest(read_text(path), path));
}

Layout plan_of(const Manifest& m, Strategy strategy, std::int64_t dp) {
  PlanOptions o;
  o.strategy = strategy;
  o.dp = o.expert_dp = dp;
  o.bucket_size = ddp_fallback_bucket_size(dp);
  return expect_ok(plan(m, o));
}

std::set<std::string> names(const json& list) {
  std::set<std::string> out;
  for (const json& n : list) out.insert(n.get<std::string>());
  return out;
}

// Owner rank of every element of every param, -1 where every rank holds it.
std::map<std::string, std::vector<std::int64_t>> element_owners(const Layout& l) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const BufferLayout& b : l.buffers) {
    for (const ParamSlot& p : b.params) {
      std::vector<std::int64_t>& owners = out[std::string(p.name)];
      const BucketRange& bucket = b.buckets[p.bucket];
      for (std::int64_t x = p.start; x < p.end; ++x) {
        owners.push_back(b.num_shards ? (x - bucket.start) / (bucket.size() / *b.num_shards) : -1);
      }
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("diff") {
  TEST_CASE("a layout is identical to itself") {
    const Layout l = plan_of(load("testdata/manifests/llama3-8b.json"), Strategy::layerwise, 8);
    const LayoutDiff d = expect_ok(diff_layouts(l, l));
    CHECK(d.identical());
    CHECK(d.verdict() == "identical");
    const json j = json::parse(diff_to_json(d));
    CHECK(j.at("identical") == true);
    for (const char* key : {"added", "removed", "resized", "moved", "owner_changed"}) {
      CHECK(j.at(key).empty());
    }
  }

  TEST_CASE("one more layer: its params are added, and what follows in backprop order moves") {
    const Layout before =
        plan_of(load("testdata/manifests/llama3-8b.json"), Strategy::sequential_dp, 16);
    const Layout after =
        plan_of(load("testdata/manifests/llama3-8b-33-layers.json"), Strategy::sequential_dp, 16);
    const LayoutDiff d = expect_ok(diff_layouts(before, after));
    CHECK_FALSE(d.identical());
    const json j = json::parse(diff_to_json(d));
    CHECK(names(j.at("added")) ==
          std::set<std::string>{"decoder.layers.32.self_attention.linear_qkv.layer_norm_weight",
                                "decoder.layers.32.mlp.linear_fc1.layer_norm_weight",
                                "decoder.layers.32.mlp.linear_fc1.weight",
                                "decoder.layers.32.mlp.linear_fc2.weight",
                                "decoder.layers.32.self_attention.linear_proj.weight",
                                "decoder.layers.32.self_attention.linear_qkv.weight"});
    CHECK(j.at("removed").empty());
    CHECK(j.at("resized").empty());
    // The output layer and final norm come first in backprop order: they stay put.
    const std::set<std::string> moved = names(j.at("moved"));
    CHECK_FALSE(moved.count("output_layer.weight"));
    CHECK_FALSE(moved.count("decoder.final_layernorm.weight"));
    CHECK(moved.count("embedding.word_embeddings.weight"));
    CHECK(d.verdict().find("6 added") != std::string::npos);
  }

  TEST_CASE("owner changes between dp 16 and dp 24 match an element-by-element count") {
    const Manifest m = load("testdata/reference/manifests/random-1000.json");
    for (Strategy s : {Strategy::sequential_dp, Strategy::layerwise, Strategy::unpadded}) {
      CAPTURE(to_string(s));
      const Layout before = plan_of(m, s, 16);
      const Layout after = plan_of(m, Strategy::sequential_dp, 24);
      const LayoutDiff d = expect_ok(diff_layouts(before, after));

      const auto old_owners = element_owners(before);
      const auto new_owners = element_owners(after);
      std::int64_t changed = 0;
      std::set<std::string> owner_changed;
      for (const auto& [name, owners] : old_owners) {
        const std::vector<std::int64_t>& now = new_owners.at(name);
        REQUIRE(now.size() == owners.size());
        for (std::size_t e = 0; e < owners.size(); ++e) changed += owners[e] != now[e];
        if (std::set<std::int64_t>(owners.begin(), owners.end()) !=
            std::set<std::int64_t>(now.begin(), now.end())) {
          owner_changed.insert(name);
        }
      }
      CHECK(d.owner_changed_elements == changed);
      CHECK(names(json::parse(diff_to_json(d)).at("owner_changed")) == owner_changed);
      CHECK(changed > 0);
    }
  }

  TEST_CASE("another strategy moves the Muon matrices into their own buffer") {
    const Manifest m = load("testdata/manifests/llama3-8b.json");
    const LayoutDiff d = expect_ok(
        diff_layouts(plan_of(m, Strategy::sequential_dp, 8), plan_of(m, Strategy::layerwise, 8)));
    const json j = json::parse(diff_to_json(d));
    CHECK(names(j.at("moved")).count("decoder.layers.0.mlp.linear_fc1.weight"));
    REQUIRE(j.at("buffers").size() == 2);
    CHECK(j.at("buffers")[1].at("key") == "bfloat16/bfloat16 layerwise");
    CHECK(j.at("buffers")[1].at("before").is_null());
  }

  TEST_CASE("removed and resized params") {
    const Manifest m = load("testdata/manifests/llama3-8b-33-layers.json");
    Manifest smaller = m;
    smaller.params.pop_back();         // output_layer.weight
    smaller.params[1].shape = {2048};  // a layer norm, half the size
    smaller.params[1].numel = 2048;
    const LayoutDiff d = expect_ok(diff_layouts(plan_of(m, Strategy::sequential_dp, 8),
                                                plan_of(smaller, Strategy::sequential_dp, 8)));
    const json j = json::parse(diff_to_json(d));
    CHECK(names(j.at("removed")) == std::set<std::string>{"output_layer.weight"});
    CHECK(names(j.at("resized")) == std::set<std::string>{std::string(m.params[1].name)});
  }
}
