// The Megatron-LM reference cases of testdata/reference/, planned by this library: the
// shared input of the reference, check and verify suites.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/plan.hpp"

namespace paramlayout::test {

/// A case's options as `cases.json` records them.
PlanOptions reference_options(const nlohmann::json& options);

struct ReferenceCase {
  std::string id;
  Manifest manifest;
  Layout layout;  ///< as this library plans it
};

/// All 144 cases, parsed and planned once.
const std::vector<ReferenceCase>& reference_cases();

}  // namespace paramlayout::test
