// Reading the tool's input files: the errors name the file.
#pragma once

#include <string>

#include "paramlayout/error.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::cli {

/// The file's name as messages show it ("<stdin>" for "-").
std::string display_name(const std::string& path);

Result<Manifest> load_manifest(const std::string& path);
Result<Layout> load_layout(const std::string& path);

}  // namespace paramlayout::cli
