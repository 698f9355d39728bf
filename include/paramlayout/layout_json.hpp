// Layout v1 JSON: writing and reading.
#pragma once

#include <string>
#include <string_view>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {

/// Layout v1 JSON text: one line per bucket and per param, so text diffs stay readable;
/// with `stats`, a derived `stats` object (paramlayout stats) after the options.
std::string write_layout_json(const Layout& layout, const LayoutStats* stats = nullptr);

/// Parses layout v1 JSON text, enforcing schemas/layout.schema.json. `source` names the
/// text in errors. Structural promises (overlaps, coverage, ...) are `check`'s job.
Result<Layout> parse_layout(std::string_view text, std::string_view source);

}  // namespace paramlayout
