// Planning: manifest + options -> layout (docs/strategies.md).
#pragma once

#include "paramlayout/error.hpp"
#include "paramlayout/grouping.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout {

/// Plans every buffer. Fails only when an offset would not fit in 64 bits.
Result<Layout> plan(const Manifest& manifest, const PlanOptions& options);

}  // namespace paramlayout
