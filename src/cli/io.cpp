#include "io.hpp"

#include <fcntl.h>
#include <fmt/color.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace paramlayout::cli {
namespace {

Error io_error(std::string_view path, std::string_view what) {
  return Error{fmt::format("{}: {}: {}", path, what, std::strerror(errno))};
}

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

}  // namespace

Result<std::string> read_file(const std::string& path) {
  const bool is_stdin = path == "-";
  const int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const std::string_view name = is_stdin ? std::string_view("<stdin>") : path;
  if (fd < 0) return io_error(name, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error{fmt::format("{}: is a directory, expected a file", name)};
  }
  std::string content;
  if (st.st_size > 0) content.reserve(static_cast<std::size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = io_error(name, "cannot read");
      if (!is_stdin) ::close(fd);
      return e;
    }
    content.append(chunk, static_cast<std::size_t>(n));
  }
  if (!is_stdin) ::close(fd);
  return content;
}

Result<void> write_file_atomically(const std::string& path, std::string_view content) {
  if (path == "-") {
    if (!write_all(STDOUT_FILENO, content)) return io_error("<stdout>", "cannot write");
    return {};
  }
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return io_error(path, "cannot create a temporary file beside it");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  const bool written = write_all(fd, content) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  if (::close(fd) != 0 || !written) {
    errno = written ? errno : saved_errno;
    Error e = io_error(path, "cannot write");
    ::unlink(temp.c_str());
    return e;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    Error e = io_error(path, "cannot replace");
    ::unlink(temp.c_str());
    return e;
  }
  return {};
}

void print_error(const Error& error) {
  if (use_color(stderr)) {
    fmt::print(stderr, "paramlayout: {} {}\n",
               fmt::styled("error:", fmt::emphasis::bold | fmt::fg(fmt::terminal_color::red)),
               error.message);
  } else {
    fmt::print(stderr, "paramlayout: error: {}\n", error.message);
  }
}

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) != 0; }

bool use_color(std::FILE* stream) {
  return is_terminal(stream) && std::getenv("NO_COLOR") == nullptr;
}

}  // namespace paramlayout::cli
