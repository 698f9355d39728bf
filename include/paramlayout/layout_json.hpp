// Layout v1 JSON: writing and reading.
#pragma once

#include <string>
#include <string_view>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"

namespace paramlayout {

/// Layout v1 JSON text: one line per bucket and per param, so text diffs stay readable.
/// `stats`, when not empty, is the JSON object written as the derived `stats` member after
/// the options (`stats_to_json`).
std::string write_layout_json(const Layout& layout, std::string_view stats = {});

/// Parses layout v1 JSON text, enforcing schemas/layout.schema.json. `source` names the
/// text in errors and becomes the layout's `source`. Structural promises (overlaps,
/// coverage, ...) are `check`'s job (`check_structure`).
Result<Layout> parse_layout(std::string_view text, std::string_view source);

}  // namespace paramlayout
