// Preloaded (LD_PRELOAD) by job_directory_tests.py into `paramlayout job`: renameat2 as on a
// filesystem that cannot exchange two names, so that the rename-aside, rename-in way is
// tested where the filesystem could exchange.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

extern "C" int renameat2(int old_dir, const char* old_path, int new_dir, const char* new_path,
                         unsigned int flags) {
  if ((flags & RENAME_EXCHANGE) != 0) {
    errno = EINVAL;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_renameat2, old_dir, old_path, new_dir, new_path, flags));
}
