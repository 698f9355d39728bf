// check by mutation: every pristine reference layout holds, and each kind of single
// corruption is caught by a message naming the mutated thing.
#include <doctest/doctest.h>

#include <functional>

#include "paramlayout/check.hpp"
#include "paramlayout/plan.hpp"
#include "reference_cases.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using Case = paramlayout::test::ReferenceCase;
using paramlayout::test::reference_cases;

namespace {

bool mentions(const std::vector<Violation>& violations, std::string_view where,
              std::string_view what) {
  for (const Violation& v : violations) {
    if (v.where.find(where) != std::string::npos && v.what.find(what) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string all(const std::vector<Violation>& violations) {
  std::string out;
  for (const Violation& v : violations) out += v.message() + "\n";
  return out;
}

/// The buffer with the most params (so neighbours exist), and a param in its middle.
std::pair<std::size_t, std::size_t> pick(const Layout& l) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < l.buffers.size(); ++i) {
    if (l.buffers[i].params.size() > l.buffers[best].params.size()) best = i;
  }
  return {best, l.buffers[best].params.size() / 2};
}

std::string param_ref(std::string_view name) { return "param \"" + std::string(name) + "\""; }

/// Applies one corruption; returns the (where, what) a violation must mention, or nothing
/// when the corruption does not apply to this layout.
using Mutation = std::function<std::optional<std::pair<std::string, std::string>>(Layout&)>;

const std::vector<std::pair<std::string, Mutation>>& mutations() {
  static const std::
      vector<std::pair<std::string, Mutation>>
          list =
              {
                  {"shift by one element",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     ParamSlot& p = b.params[k];
                     p.start += 1;
                     p.end += 1;
                     if (b.strategy != Strategy::unpadded)
                       return {{param_ref(p.name), "not a multiple of 64"}};
                     return {{param_ref(b.params[k + 1 < b.params.size() ? k + 1 : k].name), ""}};
                   }},
                  {"shrink",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     ParamSlot& p = l.buffers[i].params[k];
                     p.end -= 1;
                     return {{param_ref(p.name), "but the manifest gives it"}};
                   }},
                  {"overlap",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     if (k == 0) return std::nullopt;
                     ParamSlot& p = b.params[k];
                     const std::int64_t numel = p.numel();
                     p.start = b.params[k - 1].start;
                     p.end = p.start + numel;
                     return {{param_ref(p.name), "overlaps"}};
                   }},
                  {"drop",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     const std::string name(l.buffers[i].params[k].name);
                     l.buffers[i].params.erase(l.buffers[i].params.begin() +
                                               static_cast<std::ptrdiff_t>(k));
                     return {{param_ref(name), "missing from the layout"}};
                   }},
                  {"duplicate",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     b.params.push_back(b.params[k]);
                     return {{param_ref(b.params[k].name), "appears twice"}};
                   }},
                  {"rename",
                   [](
                       Layout& l) -> std::
                                      optional<std::pair<std::string, std::string>> {
                                        auto [i, k] = pick(l);
                                        ParamSlot& p = l.buffers[i].params[k];
                                        p.name = l.names->add(std::string(p.name) + ".renamed");
                                        return {{param_ref(p.name), "is not in the manifest"}};
                                      }},
                  {"wrong bucket id",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     ParamSlot& p = l.buffers[i].params[k];
                     p.bucket += 1;
                     return {{param_ref(p.name), "bucket"}};
                   }},
                  {"bucket end moved",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     const std::int64_t j = b.params[k].bucket;
                     b.buckets[j].end += 64;
                     if (static_cast<std::size_t>(j) + 1 < b.buckets.size()) {
                       return {{"bucket " + std::to_string(j + 1), "the previous bucket's end"}};
                     }
                     return {{"buffer " + std::to_string(i), "but the last bucket ends at"}};
                   }},
                  {"num_shards changed",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     b.num_shards = b.num_shards ? *b.num_shards + 1 : 3;
                     return {{"buffer " + std::to_string(i), "num_shards is"}};
                   }},
                  {"numel_unpadded changed",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     const std::int64_t j = b.params[k].bucket;
                     b.buckets[j].numel_unpadded += 1;
                     return {{"bucket " + std::to_string(j), "numel_unpadded is"}};
                   }},
                  {"straddle a shard edge",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     for (BufferLayout& b : l.buffers) {
                       if (b.strategy != Strategy::layerwise || *b.num_shards < 2) continue;
                       for (ParamSlot& p : b.params) {
                         const BucketRange& bucket = b.buckets[p.bucket];
                         const std::int64_t edge = bucket.start + bucket.size() / *b.num_shards;
                         const std::int64_t numel = p.numel();
                         if (numel < 128 || edge - 64 < bucket.start ||
                             edge - 64 + numel > bucket.end) {
                           continue;
                         }
                         p.start = edge - 64;
                         p.end = p.start + numel;
                         return {{param_ref(p.name), "straddles the edge of shards 0 and 1"}};
                       }
                     }
                     return std::nullopt;
                   }},
                  {"wrong dtype key",
                   [](Layout& l) -> std::optional<std::pair<std::string, std::string>> {
                     auto [i, k] = pick(l);
                     BufferLayout& b = l.buffers[i];
                     const BufferKey right = b.key;
                     b.key.grad_dtype =
                         right.grad_dtype == DType::float16 ? DType::bfloat16 : DType::float16;
                     return {{param_ref(b.params[k].name),
                              "belongs in a " + describe(right) + " buffer"}};
                   }},
              };
  return list;
}

}  // namespace

TEST_SUITE("check") {
  TEST_CASE("every pristine reference layout holds and matches a fresh plan") {
    REQUIRE(reference_cases().size() == 144);
    for (const Case& c : reference_cases()) {
      CAPTURE(c.id);
      const std::vector<Violation> v = check_layout(c.layout, c.manifest);
      CHECK_MESSAGE(v.empty(), all(v));
      CHECK(compare_with_replan(c.layout, c.manifest).empty());
    }
  }

  TEST_CASE("each single corruption is caught and named") {
    int caught = 0;
    for (const auto& [kind, mutate] : mutations()) {
      int applied = 0;
      for (const Case& c : reference_cases()) {
        Layout broken = c.layout;
        std::optional<std::pair<std::string, std::string>> expect = mutate(broken);
        if (!expect) continue;
        ++applied;
        CAPTURE(kind);
        CAPTURE(c.id);
        const std::vector<Violation> v = check_layout(broken, c.manifest);
        CHECK_MESSAGE(mentions(v, expect->first, expect->second), "expected a violation at ",
                      expect->first, " saying ", expect->second, "; got:\n", all(v));
      }
      CHECK_MESSAGE(applied >= 20, kind);
      caught += applied;
    }
    CHECK(caught > 1000);
  }

  TEST_CASE("a layout from another manifest is reported, and still checked by name") {
    const Case& c = reference_cases()[0];
    Layout other = c.layout;
    other.manifest_sha256 = "0123456789abcdef";
    const std::vector<Violation> v = check_layout(other, c.manifest);
    REQUIRE(v.size() == 1);
    CHECK(v[0].what.find("was planned from another manifest") != std::string::npos);
  }

  TEST_CASE("a hand edit that keeps every promise is caught by the replan") {
    // Swap two equal-sized adjacent params in an unpadded buffer: still a valid layout.
    for (const Case& c : reference_cases()) {
      for (std::size_t i = 0; i < c.layout.buffers.size(); ++i) {
        const BufferLayout& b = c.layout.buffers[i];
        for (std::size_t k = 1; k < b.params.size(); ++k) {
          const ParamSlot& x = b.params[k - 1];
          const ParamSlot& y = b.params[k];
          if (x.numel() != y.numel() || x.bucket != y.bucket || x.index == y.index) continue;
          Layout edited = c.layout;
          std::swap(edited.buffers[i].params[k - 1].name, edited.buffers[i].params[k].name);
          std::swap(edited.buffers[i].params[k - 1].index, edited.buffers[i].params[k].index);
          const std::vector<Violation> stale = compare_with_replan(edited, c.manifest);
          CHECK(mentions(stale, param_ref(x.name), "a fresh plan puts it"));
          return;
        }
      }
    }
    FAIL("no reference layout has two equal adjacent params");
  }

  TEST_CASE("owner ranks of a range in a sharded bucket") {
    const BucketRange bucket{1000, 1800, 800};  // 4 shards of 200
    CHECK(owner_ranks(bucket, 4, 1000, 1200) == RankRange{0, 0});
    CHECK(owner_ranks(bucket, 4, 1199, 1201) == RankRange{0, 1});
    CHECK(owner_ranks(bucket, 4, 1000, 1800) == RankRange{0, 3});
    CHECK(owner_ranks(bucket, 4, 1700, 1800) == RankRange{3, 3});
  }
}
