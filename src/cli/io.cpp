#include "io.hpp"

#include <fcntl.h>
#include <fmt/color.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "paramlayout/text.hpp"
#include "signal_cleanup.hpp"

namespace paramlayout::cli {
namespace {

Error io_error(std::string_view path, std::string_view what) {
  return Error{fmt::format("{}: {}: {}", excerpt(path), what, std::strerror(errno))};
}

}  // namespace

bool write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

namespace {

Error too_large(std::string_view name, std::uint64_t max_bytes) {
  return Error{fmt::format("{}: larger than {}, the input size limit (--max-input-size raises it)",
                           excerpt(name), human_bytes(static_cast<double>(max_bytes)))};
}

/// Where a dangling symbolic link points (following a chain of them), or `path` itself.
std::string link_target(const std::string& path) {
  std::string target = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    std::string next(PATH_MAX, '\0');
    const ssize_t n = ::readlink(target.c_str(), next.data(), next.size());
    if (n <= 0) break;
    next.resize(static_cast<std::size_t>(n));
    if (next[0] != '/') {
      const std::size_t slash = target.rfind('/');
      if (slash != std::string::npos) next = target.substr(0, slash + 1) + next;
    }
    target = std::move(next);
  }
  return target;
}

Result<void> write_directly(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return io_error(path, "cannot open");
  const bool written = write_all(fd, content);
  const int saved_errno = errno;
  if (::close(fd) != 0 || !written) {
    if (!written) errno = saved_errno;
    return io_error(path, "cannot write");
  }
  return {};
}

/// Writes `target` (a regular file or nothing yet) through a temporary file and a rename.
Result<void> replace_file(const std::string& target, std::string_view content, mode_t mode) {
  std::string temp = target + ".tmp.XXXXXX";
  // Signals between creating the file and arming the guard would leave it behind.
  std::optional<FatalSignalsBlocked> blocked(std::in_place);
  const int fd = ::mkstemp(temp.data());
  const int mkstemp_errno = errno;
  std::optional<RemovedOnSignal> guard;
  if (fd >= 0) guard.emplace(temp, RemovedOnSignal::Kind::file);
  blocked.reset();
  if (fd < 0) {
    errno = mkstemp_errno;
    return io_error(target, "cannot create a temporary file beside it");
  }
  ::fchmod(fd, mode);
  const bool written = write_all(fd, content) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  if (::close(fd) != 0 || !written) {
    if (!written) errno = saved_errno;
    Error e = io_error(target, "cannot write");
    ::unlink(temp.c_str());
    return e;
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    Error e = io_error(target, "cannot replace");
    ::unlink(temp.c_str());
    return e;
  }
  return {};
}

}  // namespace

Result<std::string> read_file(const std::string& path, std::uint64_t max_bytes) {
  const bool is_stdin = path == "-";
  const int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const std::string_view name = is_stdin ? std::string_view("<stdin>") : path;
  if (fd < 0) return io_error(name, "cannot open");
  const auto done = [&](auto result) {
    if (!is_stdin) ::close(fd);
    return result;
  };
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    return done(Error{fmt::format("{}: is a directory, expected a file", excerpt(name))});
  }
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return done(too_large(name, max_bytes));
  }
  // Grows by doubling, but never past max_bytes + 1: one byte more tells the limit is passed.
  std::string content;
  std::size_t size = 0;
  const std::uint64_t cap = max_bytes + 1;
  const std::uint64_t expected = regular ? static_cast<std::uint64_t>(st.st_size) + 1 : 0;
  content.resize(
      static_cast<std::size_t>(std::min(cap, std::max<std::uint64_t>(expected, 1 << 16))));
  for (;;) {
    if (size == content.size()) {
      if (size >= cap) return done(too_large(name, max_bytes));
      content.resize(static_cast<std::size_t>(std::min<std::uint64_t>(cap, 2 * size)));
    }
    const ssize_t n = ::read(fd, content.data() + size, content.size() - size);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return done(io_error(name, "cannot read"));
    }
    size += static_cast<std::size_t>(n);
  }
  if (size > max_bytes) return done(too_large(name, max_bytes));
  content.resize(size);
  content.shrink_to_fit();
  return done(Result<std::string>(std::move(content)));
}

Result<void> write_output(const std::string& path, std::string_view content) {
  if (path == "-") {
    if (!write_all(STDOUT_FILENO, content)) return io_error("<stdout>", "cannot write");
    return {};
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return io_error(path, "cannot write");
    // Nothing there yet, or a symbolic link to nothing: create what it names.
    return replace_file(link_target(path), content, 0666 & ~mask);
  }
  if (S_ISDIR(st.st_mode)) {
    return Error{fmt::format("{}: is a directory, expected a file", excerpt(path))};
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return write_directly(path, content);
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{
        fmt::format("{}: not a regular file, a character device or a FIFO", excerpt(path))};
  }
  // An existing file, maybe behind symbolic links: replace the file, keep the links.
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) return io_error(path, "cannot resolve");
  return replace_file(real.get(), content, st.st_mode & 07777);
}

OutputKind output_kind(const std::string& path) {
  if (path.empty() || path == "-") return OutputKind::standard_output;
  struct stat st {};
  if (path.back() == '/' || (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    return OutputKind::directory;
  }
  return OutputKind::file;
}

Result<std::string> output_target(const std::string& output, const std::string& name_in_directory) {
  switch (output_kind(output)) {
    case OutputKind::standard_output:
      return std::string("-");
    case OutputKind::file:
      return output;
    case OutputKind::directory:
      break;
  }
  if (name_in_directory.empty()) {
    return Error{
        "-o DIR/ names the output after its input file, and '-' (stdin) has no name: "
        "give -o FILE"};
  }
  if (Result<void> made = make_output_directory(output); !made) return made.error();
  return (std::filesystem::path(output) / name_in_directory).string();
}

Result<void> make_output_directory(const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (std::filesystem::is_directory(path)) return {};
  const std::filesystem::path named = path.has_filename() ? path : path.parent_path();
  const bool in_the_way = std::filesystem::exists(named) && !std::filesystem::is_directory(named);
  return Error{fmt::format("{}: cannot use as the output directory: {}", excerpt(dir),
                           in_the_way ? "a file of that name is in the way"
                           : ec       ? ec.message()
                                      : "not a directory")};
}

namespace {

/// `paramlayout: <kind>: <message>` on stderr, the kind in COLOR on a terminal.
void print_message(std::string_view kind, fmt::terminal_color color, std::string_view message) {
  if (use_color(stderr)) {
    fmt::print(stderr, "paramlayout: {} {}\n",
               fmt::styled(fmt::format("{}:", kind), fmt::emphasis::bold | fmt::fg(color)),
               message);
  } else {
    fmt::print(stderr, "paramlayout: {}: {}\n", kind, message);
  }
}

}  // namespace

void print_error(const Error& error) {
  print_message("error", fmt::terminal_color::red, error.message);
}

void print_warning(std::string_view message) {
  print_message("warning", fmt::terminal_color::yellow, message);
}

void print_note(std::string_view message) {
  print_message("note", fmt::terminal_color::cyan, message);
}

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) != 0; }

bool use_color(std::FILE* stream) {
  return is_terminal(stream) && std::getenv("NO_COLOR") == nullptr;
}

}  // namespace paramlayout::cli
