// verify: the values it moves are exact, every reference layout verifies on the cpu backend,
// a backend that loses, changes or misplaces elements is caught with the element named, and
// a broken layout stops at the static pass.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "paramlayout/plan.hpp"
#include "paramlayout/verify.hpp"
#include "reference_cases.hpp"
#include "test_support.hpp"
#include "verify/harness.hpp"

using namespace paramlayout;
using namespace paramlayout::verify;
using paramlayout::test::expect_ok;
using paramlayout::test::reference_cases;

namespace {

double decode(std::uint32_t bits, Encoding e) {
  switch (e) {
    case Encoding::float32:
      return std::bit_cast<float>(bits);
    case Encoding::bfloat16:
      return std::bit_cast<float>(bits << 16);
    case Encoding::float16: {
      const int exponent = static_cast<int>(bits >> 10 & 0x1F);
      REQUIRE(exponent != 0x1F);
      const double m = (bits & 0x3FF) / 1024.0;
      return exponent == 0 ? std::ldexp(m, -14) : std::ldexp(1 + m, exponent - 15);
    }
    case Encoding::uint8:
      return bits;
  }
  return 0;
}

/// Encodes an integer the encoding holds exactly, from the IEEE formats' definitions.
std::uint32_t encode_integer(double value, Encoding e) {
  REQUIRE(value == std::floor(value));
  if (e == Encoding::float32) return std::bit_cast<std::uint32_t>(static_cast<float>(value));
  if (e == Encoding::bfloat16) return std::bit_cast<std::uint32_t>(static_cast<float>(value)) >> 16;
  REQUIRE(e == Encoding::float16);
  if (value == 0) return 0;
  const int exponent = std::ilogb(value);
  const double mantissa = value / std::ldexp(1.0, exponent) - 1;
  REQUIRE(mantissa * 1024 == std::floor(mantissa * 1024));
  return static_cast<std::uint32_t>((exponent + 15) << 10) |
         static_cast<std::uint32_t>(mantissa * 1024);
}

/// A plain, element-at-a-time backend written from backend.hpp's contract: an oracle for
/// the cpu backend, and a base for backends that break on purpose.
class ScalarBackend : public Backend {
 public:
  explicit ScalarBackend(std::int64_t devices) : devices_(devices) {}
  std::string describe() const override { return "scalar test backend"; }
  std::int64_t devices() const override { return devices_; }
  std::int64_t preferred_block_elements() const override { return 1 << 14; }
  Result<void> reserve(std::int64_t) override { return {}; }

  Result<double> fill(const Round& round) override {
    const bool grads = round.kind == RoundKind::grads;
    send.assign(static_cast<std::size_t>(round.devices), {});
    recv.assign(static_cast<std::size_t>(round.devices), {});
    for (std::int64_t d = 0; d < round.devices; ++d) {
      auto& out = send[d];
      out.assign(static_cast<std::size_t>(grads ? round.devices * round.length : round.length),
                 0xDEADBEEF);
      for (const Segment& s : grads ? round.all_blocks : round.own_block[d]) {
        const ValueRule rule = sent_values(round, d, s);
        for (std::int64_t k = 0; k < s.length; ++k) out[s.begin + k] = rule.bits(s.element + k);
      }
      recv[d].assign(static_cast<std::size_t>(grads ? round.length : round.devices * round.length),
                     poison_bits(round.encoding));
    }
    return 0.001;
  }

  Result<double> collective(const Round& round) override {
    const std::int64_t n = round.length;
    for (std::int64_t d = 0; d < round.devices; ++d) {
      for (std::int64_t h = 0; h < round.devices; ++h) {
        for (std::int64_t k = 0; k < n; ++k) {
          if (round.kind == RoundKind::params) {
            recv[d][h * n + k] = send[h][k];
          } else if (h == 0) {
            double sum = 0;
            for (std::int64_t g = 0; g < round.devices; ++g) {
              sum += decode(send[g][d * n + k], round.encoding);
            }
            recv[d][k] = encode_integer(sum, round.encoding);
          }
        }
      }
    }
    if (fault) fault(round, recv);
    return 0.001;
  }

  Result<CheckResult> check(const Round& round) override {
    CheckResult result;
    for (std::int64_t d = 0; d < round.devices; ++d) {
      for (const Segment& s :
           round.kind == RoundKind::grads ? round.own_block[d] : round.all_blocks) {
        for (std::int64_t k = 0; k < s.length; ++k) {
          const std::uint32_t want = expected_values(round, s).bits(s.element + k);
          const std::uint32_t got = recv[d][s.begin + k];
          if (want == got) continue;
          if (result.first.size() < kKeptMismatches) {
            result.first.push_back({d, s.begin + k, s.param, s.element + k, want, got});
          }
          ++result.mismatches;
        }
      }
    }
    return result;
  }

  using Buffers = std::vector<std::vector<std::uint32_t>>;
  /// Called after each collective with the receive buffers, to break them.
  std::function<void(const Round&, Buffers&)> fault;
  Buffers send;
  Buffers recv;

 private:
  std::int64_t devices_;
};

Manifest small_manifest() {
  return expect_ok(parse_manifest(R"({"schema": "paramlayout.manifest/v1", "params": [
      {"name": "embedding", "shape": [50, 64], "dtype": "bfloat16", "embedding_or_output": true},
      {"name": "layer0.weight", "shape": [96, 64], "dtype": "bfloat16"},
      {"name": "layer0.bias", "shape": [96], "dtype": "bfloat16", "use_muon": false},
      {"name": "layer1.weight", "shape": [64, 96], "dtype": "bfloat16"},
      {"name": "layer1.norm", "shape": [37], "dtype": "float32", "use_muon": false},
      {"name": "head", "shape": [64, 50], "dtype": "float16"}]})",
                                  "small.json"));
}

Layout plan_small(const Manifest& m, Strategy strategy, std::int64_t dp) {
  PlanOptions options;
  options.strategy = strategy;
  options.dp = dp;
  options.expert_dp = dp;
  options.bucket_size = 4000;
  return expect_ok(plan(m, options));
}

VerifyReport run(const Layout& layout, const Manifest& manifest, Backend& backend,
                 std::int64_t block = 0) {
  VerifyOptions options;
  options.max_block_elements = block;
  VerifyReport report;
  REQUIRE(check_layout(layout, manifest).empty());
  const Result<void> ran = run_data_pass(layout, manifest, backend, options, report);
  if (!ran) FAIL(ran.error().message);
  return report;
}

std::int64_t total_elements(const VerifyReport& r) {
  std::int64_t n = 0;
  for (const BucketReport& b : r.buckets) n += b.elements;
  return n;
}

std::int64_t layout_numel(const Layout& l) {
  std::int64_t n = 0;
  for (const BufferLayout& b : l.buffers) n += b.numel;
  return n;
}

/// Which round (in the order the harness runs them) moves a bucket's grads or params, when
/// every bucket is one chunk.
std::size_t round_of(const Layout& layout, std::size_t buffer, std::int64_t bucket,
                     RoundKind kind) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < buffer; ++i) n += layout.buffers[i].buckets.size();
  return 2 * (n + static_cast<std::size_t>(bucket)) + (kind == RoundKind::params ? 1 : 0);
}

/// The param holding buffer offset `at`, or "" for padding: worked out from the layout.
std::string param_at(const BufferLayout& b, std::int64_t at) {
  for (const ParamSlot& p : b.params) {
    if (p.start <= at && at < p.end) return std::string(p.name);
  }
  return "";
}

}  // namespace

TEST_SUITE("verify") {
  TEST_CASE("sums of contributions are exact integers in every encoding, for any dp") {
    // The encodings of small integers, from the IEEE formats.
    CHECK(integer_bits(0, Encoding::bfloat16) == 0);
    CHECK(integer_bits(1, Encoding::bfloat16) == 0x3F80);
    CHECK(integer_bits(256, Encoding::bfloat16) == 0x4380);
    CHECK(integer_bits(3, Encoding::float16) == 0x4200);
    CHECK(integer_bits(2048, Encoding::float16) == 0x6800);
    CHECK(integer_bits(1, Encoding::float32) == 0x3F800000);
    CHECK(integer_bits(200, Encoding::uint8) == 200);
    for (Encoding e : {Encoding::float32, Encoding::bfloat16, Encoding::float16}) {
      const int precision = e == Encoding::float32 ? 24 : e == Encoding::bfloat16 ? 8 : 11;
      CHECK(kMaxContributors * (std::int64_t{contribution_mask(e)} + 1) <= std::int64_t{1}
                                                                               << precision);
      for (std::uint32_t n = 0; n <= 256; ++n) CHECK(decode(integer_bits(n, e), e) == n);
    }
    for (std::int64_t dp : {1, 2, 3, 7, 64, 4096}) {
      CAPTURE(dp);
      for (std::int64_t param = 0; param < 50; ++param) {
        // The contributors are min(dp, 4) distinct ranks, and all of them lie in [0, dp).
        CHECK(std::popcount(contributors_in(param, dp, 0, dp)) == contributors(dp));
        const std::int64_t half = dp / 2;
        CHECK((contributors_in(param, dp, 0, half) ^ contributors_in(param, dp, half, dp)) ==
              contributors_in(param, dp, 0, dp));
        const std::uint32_t mask = contribution_mask(Encoding::bfloat16);
        for (std::int64_t element = 0; element < 20; ++element) {
          const std::uint32_t sum = grad_sum(param, element, dp, 0, dp, mask);
          CHECK(sum >= static_cast<std::uint32_t>(contributors(dp)));
          CHECK(sum <= static_cast<std::uint32_t>(contributors(dp)) * (mask + 1));
        }
      }
    }
  }

  TEST_CASE("parameter patterns are never the poison pattern") {
    for (Encoding e : {Encoding::float32, Encoding::bfloat16, Encoding::float16, Encoding::uint8}) {
      for (std::int64_t param = 0; param < 20; ++param) {
        for (std::int64_t element = 0; element < 5000; ++element) {
          REQUIRE(param_bits(param, element, e) != poison_bits(e));
        }
      }
    }
  }

  TEST_CASE("the cpu backend agrees with the scalar oracle, for any number of devices") {
    const Manifest m = small_manifest();
    for (Strategy strategy : {Strategy::sequential_dp, Strategy::layerwise, Strategy::unpadded}) {
      for (std::int64_t dp : {1, 4, 6}) {
        const Layout layout = plan_small(m, strategy, dp);
        for (std::int64_t devices : {1, 2, 3, 4, 8}) {
          CAPTURE(to_string(strategy));
          CAPTURE(dp);
          CAPTURE(devices);
          ScalarBackend oracle(devices);
          const VerifyReport want = run(layout, m, oracle, 100);
          CHECK(want.mismatches == 0);
          const std::unique_ptr<Backend> cpu = make_cpu_backend(devices);
          const VerifyReport got = run(layout, m, *cpu, 100);
          CHECK(got.mismatches == 0);
          CHECK(total_elements(got) == layout_numel(layout));
          REQUIRE(got.buckets.size() == want.buckets.size());
          for (std::size_t i = 0; i < got.buckets.size(); ++i) {
            CHECK(got.buckets[i].devices == std::gcd(got.buckets[i].ranks, devices));
            CHECK(got.buckets[i].chunks == want.buckets[i].chunks);
          }
        }
      }
    }
  }

  TEST_CASE("every reference layout verifies on the cpu backend") {
    REQUIRE(reference_cases().size() == 144);
    int verified = 0;
    for (const auto& c : reference_cases()) {
      // The two multi-billion-element real models are the `verify-large` suite.
      if (layout_numel(c.layout) > 2'000'000'000) continue;
      CAPTURE(c.id);
      VerifyOptions options;
      options.backend = BackendChoice::cpu;
      options.gpus = 1 + verified % 4;                        // 1 to 4 simulated devices
      options.max_block_elements = 1 << (14 + verified % 8);  // many chunks, and few
      const VerifyReport r = expect_ok(verify_layout(c.layout, c.manifest, options));
      CHECK(r.ok());
      CHECK(total_elements(r) == layout_numel(c.layout));
      ++verified;
    }
    CHECK(verified == 128);
  }

  TEST_CASE("a lost gradient element is named: buffer, bucket, rank, param, element") {
    const Manifest m = small_manifest();
    const Layout layout = plan_small(m, Strategy::sequential_dp, 4);
    ScalarBackend backend(2);
    const std::int64_t device = 1;
    const std::int64_t position = 70;
    bool broken = false;
    backend.fault = [&](const Round& round, ScalarBackend::Buffers& recv) {
      if (broken || round.kind != RoundKind::grads) return;
      recv[device][position] = poison_bits(round.encoding);
      broken = true;
    };
    const VerifyReport r = run(layout, m, backend);
    REQUIRE(r.mismatches == 1);
    REQUIRE(r.first_mismatches.size() == 1);
    const ElementMismatch& e = r.first_mismatches[0];
    // The first round is buffer 0, bucket 0; device 1 receives the second half of it.
    const BufferLayout& b = layout.buffers[0];
    const BucketRange& bucket = b.buckets[0];
    const std::int64_t offset = bucket.start + bucket.size() / 2 + position;
    CHECK(e.buffer == 0);
    CHECK(e.bucket == 0);
    CHECK(e.round == "grads (reduce-scatter)");
    CHECK(e.offset == offset);
    CHECK(e.rank == (offset - bucket.start) / (bucket.size() / 4));
    REQUIRE(!param_at(b, offset).empty());
    CHECK(e.param == param_at(b, offset));
    for (const ParamSlot& p : b.params) {
      if (p.name == e.param) CHECK(e.element == offset - p.start);
    }
    CHECK(e.received == "never written (poison)");
    CHECK(r.buckets[0].grad_mismatches == 1);
  }

  TEST_CASE("a wrong value in padding and a misplaced all-gather are caught") {
    const Manifest m = small_manifest();
    const Layout layout = plan_small(m, Strategy::sequential_dp, 4);
    SUBCASE("padding") {
      // The first padded element of any bucket, found from the layout.
      std::size_t buffer = 0;
      std::int64_t bucket = 0;
      std::int64_t padding = -1;
      for (std::size_t i = 0; i < layout.buffers.size() && padding < 0; ++i) {
        const BufferLayout& b = layout.buffers[i];
        for (std::int64_t at = 0; at < b.numel && padding < 0; ++at) {
          if (!param_at(b, at).empty()) continue;
          buffer = i;
          padding = at;
          while (b.buckets[bucket].end <= at) ++bucket;
        }
      }
      REQUIRE(padding >= 0);
      ScalarBackend backend(1);
      std::size_t round = 0;
      const std::size_t target = round_of(layout, buffer, bucket, RoundKind::params);
      backend.fault = [&](const Round&, ScalarBackend::Buffers& recv) {
        if (round++ == target) recv[0][padding - layout.buffers[buffer].buckets[bucket].start] = 7;
      };
      const VerifyReport r = run(layout, m, backend);
      REQUIRE(r.mismatches == 1);
      CHECK(r.first_mismatches[0].param.empty());
      CHECK(r.first_mismatches[0].buffer == buffer);
      CHECK(r.first_mismatches[0].offset == padding);
      CHECK(r.first_mismatches[0].round == "params (all-gather)");
      CHECK(r.first_mismatches[0].expected.starts_with("0 "));
    }
    SUBCASE("all-gather blocks swapped") {
      ScalarBackend backend(2);
      backend.fault = [](const Round& round, ScalarBackend::Buffers& recv) {
        if (round.kind != RoundKind::params) return;
        std::rotate(recv[0].begin(), recv[0].begin() + round.length, recv[0].end());
      };
      const VerifyReport r = run(layout, m, backend);
      CHECK(r.mismatches > 0);
      CHECK(r.first_mismatches.size() == kKeptMismatches);
      for (const ElementMismatch& e : r.first_mismatches) CHECK(e.rank == 0);
    }
  }

  TEST_CASE("layerwise: a param that does not arrive whole is named with its owner") {
    const Manifest m = small_manifest();
    const Layout layout = plan_small(m, Strategy::layerwise, 4);
    std::size_t buffer = layout.buffers.size();
    for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
      if (layout.buffers[i].key.layerwise) buffer = i;
    }
    REQUIRE(buffer < layout.buffers.size());
    const BufferLayout& b = layout.buffers[buffer];
    const ParamSlot& victim = b.params.front();
    const BucketRange& bucket = b.buckets[victim.bucket];
    const std::int64_t shard = bucket.size() / 4;
    const std::int64_t owner = (victim.start - bucket.start) / shard;

    // One device per rank: rank `owner` receives the shard holding the victim.
    ScalarBackend backend(4);
    std::size_t round_number = 0;
    const std::size_t target = round_of(layout, buffer, victim.bucket, RoundKind::grads);
    backend.fault = [&](const Round&, ScalarBackend::Buffers& recv) {
      if (round_number++ != target) return;
      recv[owner][victim.start - bucket.start - owner * shard + 1] ^= 1;
    };
    const VerifyReport r = run(layout, m, backend);
    CHECK(r.mismatches == 1);
    const BucketReport& report = r.buckets[target / 2];
    CHECK(report.buffer == buffer);
    REQUIRE(report.incomplete_params.size() == 1);
    CHECK(report.incomplete_params[0] ==
          std::string(victim.name) + " (rank " + std::to_string(owner) + ")");
    CHECK(r.first_mismatches[0].element == 1);
  }

  TEST_CASE("a broken layout fails the static pass, naming the problem, with no data pass") {
    const Manifest m = small_manifest();
    const Layout sequential = plan_small(m, Strategy::sequential_dp, 4);
    const Layout layerwise = plan_small(m, Strategy::layerwise, 4);
    const auto expect_broken = [&](const Layout& layout, std::string_view where,
                                   std::string_view what) {
      VerifyOptions options;
      options.backend = BackendChoice::cpu;
      const VerifyReport r = expect_ok(verify_layout(layout, m, options));
      CHECK_FALSE(r.ok());
      CHECK(r.buckets.empty());
      std::string all;
      bool named = false;
      for (const Violation& v : r.violations) {
        all += v.message() + "\n";
        named = named || (v.where.find(where) != std::string::npos &&
                          v.what.find(what) != std::string::npos);
      }
      CHECK_MESSAGE(named, "expected ", where, ": ", what, "; got\n", all);
    };
    SUBCASE("a param shifted by one element") {
      Layout l = sequential;
      ParamSlot& p = l.buffers[0].params[1];
      p.start += 1;
      p.end += 1;
      expect_broken(l, std::string(p.name), "not a multiple of 64");
    }
    SUBCASE("two params overlapping") {
      Layout l = sequential;
      ParamSlot& p = l.buffers[0].params[1];
      const std::int64_t numel = p.numel();
      p.start = l.buffers[0].params[0].start;
      p.end = p.start + numel;
      expect_broken(l, std::string(p.name), "overlaps");
    }
    SUBCASE("a layerwise param straddling a shard edge") {
      Layout l = layerwise;
      for (BufferLayout& b : l.buffers) {
        if (!b.key.layerwise) continue;
        ParamSlot& p = b.params.front();
        const BucketRange& bucket = b.buckets[p.bucket];
        const std::int64_t numel = p.numel();
        p.start = bucket.start + bucket.size() / 4 - 64;
        p.end = p.start + numel;
        expect_broken(l, std::string(p.name), "straddles the edge of shards");
      }
    }
    SUBCASE("a bucket end not divisible by dp") {
      Layout l = sequential;
      BufferLayout& b = l.buffers[0];
      b.buckets.back().end += 1;
      b.numel += 1;
      expect_broken(l, "bucket " + std::to_string(b.buckets.size() - 1),
                    "is not a multiple of 128 (bucket_divisor(4))");
    }
    SUBCASE("a missing param") {
      Layout l = sequential;
      const std::string name(l.buffers[0].params[0].name);
      l.buffers[0].params.erase(l.buffers[0].params.begin());
      expect_broken(l, name, "missing from the layout");
    }
    SUBCASE("a wrong num_shards") {
      Layout l = sequential;
      l.buffers[0].num_shards = 3;
      expect_broken(l, "buffer 0", "num_shards is");
    }
  }
}

TEST_SUITE("verify-large") {
  TEST_CASE("the multi-billion-element reference layouts verify on the cpu backend") {
    int verified = 0;
    for (const auto& c : reference_cases()) {
      if (layout_numel(c.layout) <= 2'000'000'000) continue;
      CAPTURE(c.id);
      VerifyOptions options;
      options.backend = BackendChoice::cpu;
      const VerifyReport r = expect_ok(verify_layout(c.layout, c.manifest, options));
      CHECK(r.ok());
      CHECK(total_elements(r) == layout_numel(c.layout));
      ++verified;
    }
    CHECK(verified == 16);
  }
}
