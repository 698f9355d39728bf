// Files and the terminal: the only place the tool touches them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "paramlayout/error.hpp"

namespace paramlayout::cli {

/// The largest input read by default: far above a million-param manifest (about 150 MB).
inline constexpr std::uint64_t kDefaultMaxInputBytes = std::uint64_t{1} << 30;
/// The largest input the JSON reader can hold at all.
inline constexpr std::uint64_t kLargestInputBytes = (std::uint64_t{1} << 32) - 1;

/// The whole file, or standard input for "-"; an error when it holds more than `max_bytes`
/// (an endless stream such as /dev/zero is read no further).
Result<std::string> read_file(const std::string& path,
                              std::uint64_t max_bytes = kDefaultMaxInputBytes);

/// Writes `content` to `path` ("-" is stdout) so that readers never see a partial file: a
/// regular file (or a new one) is written to a temporary file beside it and renamed over
/// it, which is removed again if the process is interrupted by a signal it can catch. A
/// symbolic link is followed and its target replaced; character devices and FIFOs
/// (/dev/stdout, a pipe) are written directly.
Result<void> write_output(const std::string& path, std::string_view content);

/// Writes all of `content` to the file descriptor `fd`, again after EINTR; false (errno
/// says why) on an error.
bool write_all(int fd, std::string_view content);

/// Where `-o PATH` sends output, by the rule every command follows: "" and "-" are stdout; a
/// path that ends in '/' or names an existing directory (or a link to one) is a directory;
/// anything else is a file.
enum class OutputKind : std::uint8_t { standard_output, file, directory };
OutputKind output_kind(const std::string& path);

/// Where one output goes by the -o rule: "-" (stdout), `output` itself (a file), or
/// `output`/`name_in_directory` for a directory, which is created when missing. An empty
/// `name_in_directory` means the input has no name to give (stdin): an error for a directory.
Result<std::string> output_target(const std::string& output, const std::string& name_in_directory);

/// `dir` made ready for output files: created with its parents when missing; an error naming
/// it when it cannot be (a file is in the way, no permission).
Result<void> make_output_directory(const std::string& dir);

/// Prints `paramlayout: error: <message>` on stderr.
void print_error(const Error& error);

/// Prints `paramlayout: warning: <message>` on stderr: the command goes on, but the user
/// should look (a plan far off the others, a directory kept).
void print_warning(std::string_view message);

/// Prints `paramlayout: note: <message>` on stderr: something the user may not expect.
void print_note(std::string_view message);

/// True when `stream` is a terminal (for progress lines).
bool is_terminal(std::FILE* stream);

/// True when `stream` is a terminal and NO_COLOR is unset.
bool use_color(std::FILE* stream);

}  // namespace paramlayout::cli
