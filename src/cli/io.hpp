// Files and the terminal: the only place the tool touches them.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "paramlayout/error.hpp"

namespace paramlayout::cli {

/// The whole file, or standard input for "-".
Result<std::string> read_file(const std::string& path);

/// Writes `content` to `path` through a temporary file in the same directory and a
/// rename, so readers see the old file or the new one, never a partial one. "-" is stdout.
Result<void> write_file_atomically(const std::string& path, std::string_view content);

/// Prints `paramlayout: error: <message>` on stderr.
void print_error(const Error& error);

/// True when `stream` is a terminal (for progress lines).
bool is_terminal(std::FILE* stream);

/// True when `stream` is a terminal and NO_COLOR is unset.
bool use_color(std::FILE* stream);

}  // namespace paramlayout::cli
