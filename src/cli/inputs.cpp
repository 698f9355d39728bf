#include "inputs.hpp"

#include "io.hpp"
#include "paramlayout/layout_json.hpp"

namespace paramlayout::cli {

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

Result<Manifest> load_manifest(const std::string& path) {
  Result<std::string> text = read_file(path);
  if (!text) return text.error();
  return parse_manifest(*text, display_name(path));
}

Result<Layout> load_layout(const std::string& path) {
  Result<std::string> text = read_file(path);
  if (!text) return text.error();
  return parse_layout(*text, display_name(path));
}

}  // namespace paramlayout::cli
