#include "signal_cleanup.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace paramlayout::cli {
namespace {

// The path to remove, read by the handler of a fatal signal. Plain storage: a signal handler
// may only read it.
char g_path[4097] = {};
volatile std::sig_atomic_t g_active = 0;
volatile std::sig_atomic_t g_is_directory = 0;
// Where the handler reads a directory's entries.
alignas(8) char g_entries[8192];

/// Removes the files in the directory `g_path` names, then the directory; async-signal-safe
/// (system calls only). Entries are read again after each pass that removed some, since
/// removing entries while reading them may skip others.
void remove_directory_in_handler() {
#ifdef SYS_getdents64
  const int fd = ::open(g_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  for (bool removed = true; removed;) {
    removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, g_entries, sizeof g_entries);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        // struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name.
        std::uint16_t length = 0;
        std::memcpy(&length, g_entries + at + 16, sizeof length);
        const char* name = g_entries + at + 19;
        const bool dots =
            name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
        if (!dots && ::unlinkat(fd, name, 0) == 0) removed = true;
        if (length == 0) break;
        at += length;
      }
    }
  }
  ::close(fd);
#endif
  ::rmdir(g_path);
}

extern "C" void remove_guarded_path(int signal) {
  if (g_active) {
    if (g_is_directory) {
      remove_directory_in_handler();
    } else {
      ::unlink(g_path);
    }
  }
  // SA_RESETHAND restored the default action; it ends the process once this returns.
  ::raise(signal);
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const std::string& path, Kind kind) {
  guard(path, kind);
  struct sigaction action {};
  action.sa_handler = remove_guarded_path;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    ::sigaction(kFatalSignals[i], nullptr, &previous_[i]);
    installed_[i] =
        previous_[i].sa_handler == SIG_DFL && ::sigaction(kFatalSignals[i], &action, nullptr) == 0;
  }
}

RemovedOnSignal::~RemovedOnSignal() {
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (installed_[i]) ::sigaction(kFatalSignals[i], &previous_[i], nullptr);
  }
  g_active = 0;
}

void RemovedOnSignal::guard(const std::string& path, Kind kind) {
  g_active = 0;
  if (path.empty() || path.size() >= sizeof g_path) return;
  std::memcpy(g_path, path.c_str(), path.size() + 1);
  g_is_directory = kind == Kind::directory ? 1 : 0;
  g_active = 1;
}

FatalSignalsBlocked::FatalSignalsBlocked() {
  sigset_t fatal;
  sigemptyset(&fatal);
  for (int s : kFatalSignals) sigaddset(&fatal, s);
  ::sigprocmask(SIG_BLOCK, &fatal, &previous_);
}

FatalSignalsBlocked::~FatalSignalsBlocked() { ::sigprocmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace paramlayout::cli
