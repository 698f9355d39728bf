// The promises a layout keeps without its manifest, and the readers that rely on them: stats,
// render and diff refuse a broken layout with check's message and never compute past 64 bits
// or allocate for a claimed number. Also the excerpts that keep messages short.
#include <doctest/doctest.h>

#include <limits>

#include "paramlayout/check.hpp"
#include "paramlayout/diff.hpp"
#include "paramlayout/layout_json.hpp"
#include "paramlayout/render.hpp"
#include "paramlayout/stats.hpp"
#include "reference_cases.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;
using paramlayout::test::read_text;
using paramlayout::test::reference_cases;
using paramlayout::test::source_path;

namespace {

/// A layout of testdata/repro/, read as the CLI reads it.
Layout repro_layout(const std::string& name) {
  const std::string path = source_path("testdata/repro/" + name);
  return expect_ok(parse_layout(read_text(path), name));
}

Manifest manifest_of(const std::string& text) { return expect_ok(parse_manifest(text, "m.json")); }

/// Every reader's error for `layout` (diffed against itself), or "" where one succeeds.
std::vector<std::string> reader_errors(const Layout& layout, const Manifest& manifest) {
  std::vector<std::string> out;
  const Result<LayoutStats> stats = layout_stats(layout, manifest);
  out.push_back(stats ? "" : stats.error().message);
  const Result<std::string> svg = render_svg(layout);
  out.push_back(svg ? "" : svg.error().message);
  const Result<LayoutDiff> diff = diff_layouts(layout, layout);
  out.push_back(diff ? "" : diff.error().message);
  return out;
}

}  // namespace

TEST_SUITE("check") {
  TEST_CASE("every reference layout keeps its promises without its manifest") {
    for (const test::ReferenceCase& c : reference_cases()) {
      CAPTURE(c.id);
      CHECK(check_structure(c.layout).empty());
      CHECK(validate_structure(c.layout));
    }
  }

  TEST_CASE("readers refuse each broken layout with check's first message") {
    const Manifest m = expect_ok(parse_manifest(
        read_text(source_path("testdata/reference/manifests/random-1026.json")), "m.json"));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"render_stats_bucket_oob.layout.json", "param \"p1\": is in bucket 5, but the buffer"},
        {"render_stats_shard0.layout.json", "bucket 0: size 2 is not a multiple of 128"},
        {"stats_rank_oob.layout.json", "[307200, 322200) is not inside its bucket [0, 76800)"},
        {"render_alloc_64x1M.layout.json", "bucket 0: holds no param"},
        {"numel_sum_overflow.layout.json", "[128, 9223372036854775807) overlaps param \"p1\""},
    };
    for (const auto& [name, message] : cases) {
      CAPTURE(name);
      const Layout layout = repro_layout(name);
      const std::vector<Violation> v = check_structure(layout);
      REQUIRE_FALSE(v.empty());
      CHECK(v.front().message().find(message) != std::string::npos);
      for (const std::string& error : reader_errors(layout, m)) {
        CHECK(error.find(name + ": not a valid layout: ") == 0);
        CHECK(error.find(message) != std::string::npos);
      }
    }
  }

  TEST_CASE("a shared embedding's rounded bucket end needs no manifest to be accepted") {
    // Megatron-LM closes the bucket before a shared embedding at an aligned start.
    const Manifest m = manifest_of(R"({"schema": "paramlayout.manifest/v1", "params": [
        {"name": "emb", "shape": [100], "dtype": "float32", "shared_embedding": true},
        {"name": "w", "shape": [10], "dtype": "float32"}]})");
    PlanOptions o;
    o.dp = 2;
    o.bucket_size = 1'000'000;
    const Layout l = expect_ok(plan(m, o));
    REQUIRE(l.buffers[0].buckets.size() == 2);
    CHECK(l.buffers[0].buckets[0].numel_unpadded == 64);  // "w" ends at 10, rounded up
    CHECK(check_layout(l, m).empty());
    CHECK(check_structure(l).empty());
  }

  TEST_CASE("a picture of 2^20 shards holds a few boxes per param, a diff counts in closed form") {
    constexpr std::int64_t kBucket = std::int64_t{1} << 27;
    // 64 buckets of 2^27 elements over 2^20 ranks, each holding one param across all ranks:
    // the picture must not grow with buckets x shards (2^26 cells).
    Layout l;
    l.source = "wide.json";
    l.options.dp = l.options.expert_dp = std::int64_t{1} << 20;
    l.options.bucket_size = std::int64_t{1} << 27;
    BufferLayout& b = l.buffers.emplace_back();
    b.num_shards = l.options.dp;
    for (std::int64_t j = 0; j < 64; ++j) {
      b.buckets.push_back({j * kBucket, (j + 1) * kBucket, kBucket});
      b.params.push_back({l.names->add("layers." + std::to_string(j) + ".w"), j * kBucket,
                          (j + 1) * kBucket, j, j});
    }
    b.numel = b.numel_unpadded = 64 * kBucket;
    REQUIRE(check_structure(l).empty());
    const std::string svg = expect_ok(render_svg(l));
    CHECK(svg.size() < 64 * 1024);

    // Over half the ranks, shards of 256 elements instead of 128: element e keeps its owner
    // only where e / 128 == e / 256, the first 128 elements of each param.
    Layout half = l;
    half.options.dp = half.options.expert_dp = std::int64_t{1} << 19;
    half.buffers[0].num_shards = half.options.dp;
    const LayoutDiff d = expect_ok(diff_layouts(l, half));
    CHECK(d.owner_changed_elements == 64 * (kBucket - 128));
  }

  TEST_CASE("figures past 64 bits are refused as too large, not wrapped") {
    // One unpadded float32 buffer of 2^62 elements: 2^64 bytes of params per rank.
    Manifest m = manifest_of(R"({"schema": "paramlayout.manifest/v1", "params": [
        {"name": "a", "shape": [4611686018427387904], "dtype": "float32"}]})");
    PlanOptions o;
    o.strategy = Strategy::unpadded;
    o.bucket_size = std::nullopt;
    const Layout l = expect_ok(plan(m, o));
    REQUIRE(check_layout(l, m).empty());
    const Result<LayoutStats> stats = layout_stats(l, m);
    REQUIRE_FALSE(stats);
    CHECK(stats.error().message.find("m.json: ") == 0);
    CHECK(stats.error().message.find("too large") != std::string::npos);
    const Result<LayoutDiff> diff = diff_layouts(l, l);
    REQUIRE_FALSE(diff);
    CHECK(diff.error().message.find("too large") != std::string::npos);
    CHECK(render_svg(l));  // drawing needs no byte count
  }

  TEST_CASE("checked arithmetic") {
    constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
    CHECK(checked_add(max - 1, 1) == max);
    CHECK_FALSE(checked_add(max, 1));
    CHECK(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31) == std::int64_t{1} << 62);
    CHECK_FALSE(checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31));
    BufferLayout b;
    b.params = {{"a", 0, max, 0, 0}, {"b", 0, 1, 0, 1}};
    CHECK_FALSE(b.param_numel());
  }
}

TEST_SUITE("manifest") {
  TEST_CASE("an excerpt of input is short, printable and whole characters") {
    CHECK(excerpt("layers.0.w") == "layers.0.w");
    CHECK(excerpt("a\nb\x01") == "a\\x0ab\\x01");
    CHECK(excerpt("\xc3\xa9t\xc3\xa9") == "\xc3\xa9t\xc3\xa9");
    CHECK(excerpt("\xff") == "\\xff");
    const std::string long_name = std::string(500, 'a') + std::string(500, 'b');
    const std::string cut = excerpt(long_name);
    CHECK(cut.size() <= kMaxExcerpt);
    CHECK(cut.find("aaa...bbb") != std::string::npos);
    std::string accents;
    for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";  // never cut inside a character
    CHECK(excerpt(accents).find("\\x") == std::string::npos);
  }

  TEST_CASE("text simdjson rejects is located and quoted briefly") {
    const auto error = [](const std::string& text) {
      const Result<Manifest> m = parse_manifest(text, "m.json");
      REQUIRE_FALSE(m);
      return m.error().message;
    };
    const std::string ok = R"({"schema": "paramlayout.manifest/v1", "params": []})";
    CHECK(error("\xef\xbb\xbf" + ok).find("m.json: starts with a UTF-8 byte order mark") == 0);
    CHECK(error(ok.substr(0, 5) + '\0' + ok.substr(5)) ==
          "m.json: line 1, column 6: a NUL byte, which JSON text never holds (a binary or "
          "damaged file?)");
    CHECK(error("\n" + std::string(1025, '[') + std::string(1025, ']'))
              .find("m.json: line 2, column 1025: nesting deeper than 1024") == 0);
    CHECK(error(R"({"schema": "paramlayout.manifest/v1", "params": [{"name": "a", "shape": [)"
                R"(1e400], "dtype": "float32"}]})") ==
          "m.json: /params/0/shape/0: number out of range: 1e400");
    CHECK(error(R"({"schema": "paramlayout.manifest/v1", "params": [{"name": "a", "shape": [)" +
                std::string(10000, '9') + R"(], "dtype": "float32"}]})")
              .size() < 300);
    CHECK(error(R"({"schema": ")" + std::string(100000, 's') + R"(", "params": []})").size() < 300);
  }
}
