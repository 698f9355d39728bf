// Megatron-LM's layerwise packer against a plain transliteration of its rules
// (docs/strategies.md), which scans every shard for every param (the reference's
// O(params x dp) shape), on random manifests at dp sizes the reference cases do not reach.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "paramlayout/plan.hpp"
#include "test_support.hpp"

using namespace paramlayout;
using paramlayout::test::expect_ok;

namespace {

struct Slot {
  std::int64_t start, end, bucket;
  bool operator==(const Slot&) const = default;
};

struct OracleBuffer {
  std::map<std::string, Slot> slots;
  std::vector<BucketRange> buckets;
};

std::int64_t align64(std::int64_t v) { return (v + 63) / 64 * 64; }
std::int64_t pad(std::int64_t v, std::int64_t d) { return (v + d - 1) / d * d; }

std::int64_t cost_of(const Param& p) {
  if (p.shape.size() != 2) return p.numel;
  std::int64_t m = p.shape[0] * p.gtp_remat_size;
  std::int64_t n = p.shape[1];
  return std::max(m, n) * std::min(m, n) * std::min(m, n);
}

OracleBuffer oracle_layerwise(const std::vector<const Param*>& params, std::int64_t dp,
                              std::optional<std::int64_t> bucket_size, bool busbw) {
  const std::int64_t divisor = std::lcm(std::int64_t{64}, bucket_divisor(dp, busbw) / dp);
  OracleBuffer out;
  std::vector<std::int64_t> loads(dp, 0);
  std::int64_t bucket_start = 0;

  auto emit = [&](const std::vector<const Param*>& chunk, bool shared) {
    if (chunk.empty()) return;
    std::vector<std::vector<const Param*>> shards(dp);
    std::vector<std::int64_t> cursor(dp, 0);
    std::int64_t total = 0;
    for (const Param* p : chunk) total += p->numel;
    if (shared) {
      shards[0].push_back(chunk[0]);
      std::fill(cursor.begin(), cursor.end(), chunk[0]->numel);
    } else {
      std::vector<const Param*> sorted = chunk;
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const Param* a, const Param* b) { return cost_of(*a) > cost_of(*b); });
      const double cap = static_cast<double>(total) / static_cast<double>(dp) * (1.0 + 0.3);
      for (const Param* p : sorted) {
        std::int64_t best = -1;
        for (std::int64_t s = 0; s < dp; ++s) {
          if (static_cast<double>(align64(cursor[s]) + p->numel) <= cap &&
              (best < 0 || loads[s] < loads[best])) {
            best = s;
          }
        }
        if (best < 0) {
          best = 0;
          for (std::int64_t s = 1; s < dp; ++s) {
            if (cursor[s] < cursor[best]) best = s;
          }
        }
        shards[best].push_back(p);
        cursor[best] = align64(cursor[best]) + p->numel;
        loads[best] += cost_of(*p);
      }
    }
    const std::int64_t shard_size = pad(*std::max_element(cursor.begin(), cursor.end()), divisor);
    const std::int64_t bucket = static_cast<std::int64_t>(out.buckets.size());
    for (std::int64_t s = 0; s < dp; ++s) {
      std::int64_t c = bucket_start + s * shard_size;
      for (const Param* p : shards[s]) {
        c = align64(c);
        out.slots[std::string(p->name)] = {c, c + p->numel, bucket};
        c += p->numel;
      }
    }
    out.buckets.push_back({bucket_start, bucket_start + dp * shard_size, total});
    bucket_start += dp * shard_size;
  };

  std::vector<const Param*> chunk;
  std::int64_t chunk_numel = 0;
  std::int64_t chunk_max = 0;
  std::vector<std::int64_t> est(dp, 0);
  auto reset = [&] {
    chunk.clear();
    chunk_numel = 0;
    chunk_max = 0;
    std::fill(est.begin(), est.end(), 0);
  };
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Param* p = *it;
    if (p->shared_embedding) {
      emit(chunk, false);
      reset();
      emit({p}, true);
      continue;
    }
    if (bucket_size && !chunk.empty()) {
      const std::int64_t threshold = std::max(
          *bucket_size, static_cast<std::int64_t>(static_cast<double>(dp * chunk_max) * 0.9));
      const std::int64_t lo = *std::min_element(est.begin(), est.end());
      const std::int64_t hi = *std::max_element(est.begin(), est.end());
      const bool absorbed = align64(lo) + p->numel <= pad(hi, divisor);
      if (chunk_numel >= threshold && !absorbed) {
        emit(chunk, false);
        reset();
      }
    }
    const auto s = std::min_element(est.begin(), est.end()) - est.begin();
    est[s] = align64(est[s]) + p->numel;
    chunk.push_back(p);
    chunk_numel += p->numel;
    chunk_max = std::max(chunk_max, p->numel);
  }
  emit(chunk, false);
  return out;
}

Manifest random_manifest(std::mt19937_64& rng, int count) {
  Manifest m;
  m.source = "random";
  std::uniform_int_distribution<int> kind(0, 9);
  auto dim = [&] {
    // Log-uniform sizes from 1 to ~4096, often round, as real models are.
    const int bits = std::uniform_int_distribution<int>(0, 12)(rng);
    std::int64_t d = std::int64_t{1} << bits;
    if (kind(rng) < 4) d += std::uniform_int_distribution<std::int64_t>(0, d)(rng);
    return d;
  };
  for (int i = 0; i < count; ++i) {
    Param p;
    p.name = m.names->add("p" + std::to_string(i));
    p.dtype = DType::bfloat16;
    const int k = kind(rng);
    if (k < 6) {
      p.shape = {dim(), dim()};
    } else if (k < 9) {
      p.shape = {dim()};
    } else {
      p.shape = {dim(), dim(), 2};
    }
    p.numel = 1;
    for (std::int64_t d : p.shape) p.numel *= d;
    if (kind(rng) == 0) p.gtp_remat_size = 4;
    if (std::uniform_int_distribution<int>(0, 60)(rng) == 0) p.shared_embedding = true;
    m.params.push_back(std::move(p));
  }
  return m;
}

}  // namespace

TEST_SUITE("layerwise-oracle") {
  TEST_CASE("the fast packer places every param where the plain rules do") {
    std::mt19937_64 rng(20261202);
    int compared = 0;
    for (std::int64_t dp : {1, 2, 3, 5, 8, 13, 64, 100, 256, 1000}) {
      for (int round = 0; round < 6; ++round) {
        const Manifest m = random_manifest(rng, 40 + 60 * round);
        PlanOptions o;
        o.strategy = Strategy::layerwise;
        o.dp = o.expert_dp = dp;
        o.pad_for_high_nccl_busbw = round % 3 == 2;
        const std::int64_t sizes[] = {0, 1000, 20000, 300000, 5000000, 64};
        if (round > 0) o.bucket_size = sizes[round];
        const Layout layout = expect_ok(plan(m, o));

        std::vector<const Param*> layerwise;
        for (const Param& p : m.params) {
          if (buffer_key_of(p, o).layerwise) layerwise.push_back(&p);
        }
        const OracleBuffer want =
            oracle_layerwise(layerwise, dp, o.bucket_size, o.pad_for_high_nccl_busbw);
        for (const BufferLayout& b : layout.buffers) {
          if (!b.key.layerwise) continue;
          CAPTURE(dp);
          CAPTURE(round);
          REQUIRE(b.buckets == want.buckets);
          for (const ParamSlot& p : b.params) {
            CHECK(Slot{p.start, p.end, p.bucket} == want.slots.at(std::string(p.name)));
          }
          ++compared;
        }
      }
    }
    CHECK(compared == 60);
  }
}
