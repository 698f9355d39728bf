// The padding arithmetic of docs/strategies.md, against values worked out by hand.
#include <doctest/doctest.h>

#include "paramlayout/layout.hpp"

using namespace paramlayout;

TEST_SUITE("rules") {
  TEST_CASE("pad and align round up to the next multiple") {
    CHECK(pad_to<std::int64_t>(0, 64) == 0);
    CHECK(pad_to<std::int64_t>(1, 64) == 64);
    CHECK(pad_to<std::int64_t>(64, 64) == 64);
    CHECK(pad_to<std::int64_t>(65, 64) == 128);
    CHECK(pad_to<std::int64_t>(100, 384) == 384);
    CHECK(align_param_start<std::int64_t>(130) == 192);
  }

  TEST_CASE("bucket divisor is lcm(dp, 128), and 65536 more with high-busbw padding") {
    CHECK(bucket_divisor(1, false) == 128);
    CHECK(bucket_divisor(8, false) == 128);
    CHECK(bucket_divisor(3, false) == 384);
    CHECK(bucket_divisor(256, false) == 256);
    CHECK(bucket_divisor(96, false) == 384);
    CHECK(bucket_divisor(8, true) == 65536);
    CHECK(bucket_divisor(3, true) == 196608);
  }

  TEST_CASE("shard divisor is lcm(64, bucket_divisor / dp)") {
    CHECK(shard_divisor(8, false) == 64);    // lcm(64, 16)
    CHECK(shard_divisor(1, false) == 128);   // lcm(64, 128)
    CHECK(shard_divisor(3, false) == 128);   // lcm(64, 128)
    CHECK(shard_divisor(256, false) == 64);  // lcm(64, 1)
    CHECK(shard_divisor(8, true) == 8192);   // lcm(64, 8192)
    CHECK(shard_divisor(96, false) == 64);   // lcm(64, 4)
  }

  TEST_CASE("default bucket size is max(40M, 1M * dp)") {
    CHECK(ddp_fallback_bucket_size(1) == 40'000'000);
    CHECK(ddp_fallback_bucket_size(40) == 40'000'000);
    CHECK(ddp_fallback_bucket_size(64) == 64'000'000);
  }

  TEST_CASE("names round-trip") {
    for (Strategy s : {Strategy::unpadded, Strategy::sequential_dp, Strategy::layerwise}) {
      CHECK(parse_strategy(to_string(s)) == s);
    }
    CHECK(parse_dtype("uint8") == std::nullopt);
    CHECK(parse_dtype("uint8", true) == DType::uint8);
    CHECK(describe(BufferKey{DType::uint8, DType::float32, true, true}) ==
          "uint8/float32 expert layerwise");
  }
}
