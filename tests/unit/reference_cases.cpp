#include "reference_cases.hpp"

#include "test_support.hpp"

namespace paramlayout::test {

PlanOptions reference_options(const nlohmann::json& o) {
  PlanOptions options;
  options.strategy = *parse_strategy(o.at("strategy").get<std::string>());
  options.dp = o.at("dp").get<std::int64_t>();
  options.expert_dp = o.value("expert_dp", options.dp);
  const nlohmann::json& bucket = o.at("bucket_size");
  if (bucket.is_string()) {
    REQUIRE(bucket == "default");
    options.bucket_size = ddp_fallback_bucket_size(options.dp);
  } else if (!bucket.is_null()) {
    options.bucket_size = bucket.get<std::int64_t>();
  }
  options.grad_reduce_in_fp32 = o.at("grad_reduce_in_fp32").get<bool>();
  options.pad_for_high_nccl_busbw = o.at("pad_for_high_nccl_busbw").get<bool>();
  return options;
}

const std::vector<ReferenceCase>& reference_cases() {
  static const std::vector<ReferenceCase> cases = [] {
    std::vector<ReferenceCase> out;
    const std::string root = source_path("testdata/reference/");
    for (const nlohmann::json& c : nlohmann::json::parse(read_text(root + "cases.json"))) {
      const std::string path = root + c.at("manifest").get<std::string>();
      Manifest m = expect_ok(parse_manifest(read_text(path), path));
      Layout l = expect_ok(plan(m, reference_options(c.at("options"))));
      out.push_back({c.at("id").get<std::string>(), std::move(m), std::move(l)});
    }
    return out;
  }();
  return cases;
}

}  // namespace paramlayout::test
