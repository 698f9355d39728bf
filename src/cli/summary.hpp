// Human-readable summaries for the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::cli {

/// Per buffer: key, params, buckets, numel, padding %, bytes per rank of params and grads.
void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout);

}  // namespace paramlayout::cli
