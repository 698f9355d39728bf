// Human-readable summaries for the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::cli {

/// 1234567 -> "1,234,567".
std::string group_digits(std::int64_t value);

/// Bytes as "14.96 GiB", "512.0 KiB", "12 B".
std::string human_bytes(double bytes);

/// Per buffer: key, params, buckets, numel, padding %, bytes per rank of params and grads.
void print_plan_summary(std::FILE* out, const Manifest& manifest, const Layout& layout);

}  // namespace paramlayout::cli
