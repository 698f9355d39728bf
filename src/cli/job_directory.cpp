#include "job_directory.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "io.hpp"
#include "signal_cleanup.hpp"

namespace paramlayout::cli {
namespace {

namespace fs = std::filesystem;

// What a run leaves beside DIR while it works: `.NAME` + tag + its process id.
constexpr std::string_view kNewTag = ".paramlayout-new-";
constexpr std::string_view kOldTag = ".paramlayout-old-";
static_assert(kNewTag.size() == kOldTag.size());

Error io_error(std::string_view path, std::string_view what) {
  return Error{fmt::format("{}: {}: {}", excerpt(path), what, std::strerror(errno))};
}

/// True when `text` is one or more decimal digits.
bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Where DIR is: the directory holding it and its name there.
struct Place {
  std::string parent;
  std::string name;
  std::string path() const { return parent == "/" ? "/" + name : parent + "/" + name; }
};

/// DIR as given (trailing slashes dropped), or the directory a symbolic link names.
Result<Place> locate(const std::string& dir) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
    if (!real) {
      if (errno == ENOENT) {
        return Error{fmt::format("{}: a symbolic link to nothing: give the job directory itself",
                                 excerpt(dir))};
      }
      return io_error(dir, "cannot resolve");
    }
    path = real.get();
  }
  const std::size_t slash = path.rfind('/');
  Place place{slash == std::string::npos ? "."
              : slash == 0               ? "/"
                                         : path.substr(0, slash),
              slash == std::string::npos ? path : path.substr(slash + 1)};
  if (place.name.empty() || place.name == "." || place.name == "..") {
    return Error{fmt::format(
        "{}: a job directory is replaced as a whole, so it needs a name of its own: give -o "
        "NAME/",
        excerpt(dir))};
  }
  return place;
}

/// The names in `dir` that are not a job's files (a directory's with a trailing '/'), sorted;
/// whether it holds job.json.
struct Contents {
  std::vector<std::string> foreign;
  bool has_job_json = false;
};

Result<Contents> read_contents(const std::string& dir) {
  Contents contents;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_regular_file(status) && is_job_file_name(name)) {
      contents.has_job_json = contents.has_job_json || name == "job.json";
    } else {
      contents.foreign.push_back(fs::is_directory(status) ? name + "/" : name);
    }
  }
  if (ec) return Error{fmt::format("{}: cannot read: {}", excerpt(dir), ec.message())};
  std::sort(contents.foreign.begin(), contents.foreign.end());
  return contents;
}

/// At most a few names, then how many more.
std::string list_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 5;
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) shown.push_back(excerpt(names[i]));
  const std::string more =
      names.size() > kShown ? fmt::format(" and {} more", names.size() - kShown) : "";
  return fmt::format("{}{}", fmt::join(shown, ", "), more);
}

/// Whether DIR exists (then its permissions), or an error when it must not be replaced.
Result<std::optional<mode_t>> check_existing(const std::string& dir, const std::string& path,
                                             bool replace_foreign) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<mode_t>();
    return io_error(dir, "cannot use as the job directory");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Error{fmt::format(
        "{}: cannot use as the job directory: a file of that name is in the way", excerpt(dir))};
  }
  Result<Contents> contents = read_contents(path);
  if (!contents) return contents.error();
  if (!contents->foreign.empty() && !replace_foreign) {
    return Error{fmt::format(
        "{}: {} {}; a job directory is replaced whole, so they would be deleted (--replace "
        "deletes them)",
        excerpt(dir),
        contents->has_job_json ? "holds files that are not a job's:"
                               : "not a job directory (no job.json), it holds",
        list_names(contents->foreign))};
  }
  return std::optional<mode_t>(st.st_mode & 07777);
}

/// True when `path` is a directory (not a link to one) holding only job files.
bool holds_only_job_files(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  Result<Contents> contents = read_contents(path);
  return contents && contents->foreign.empty();
}

/// Removes what killed runs into the same DIR left beside it: `.NAME.paramlayout-new-PID`
/// and `.NAME.paramlayout-old-PID` of processes that are gone, each holding only job files
/// (a warning names one that holds anything else).
void remove_leftovers(const Place& place) {
  const std::string prefix = "." + place.name;
  std::error_code ec;
  for (fs::directory_iterator it(place.parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    std::string_view rest = std::string_view(name).substr(prefix.size());
    if (!rest.starts_with(kNewTag) && !rest.starts_with(kOldTag)) continue;
    rest.remove_prefix(kNewTag.size());
    if (!all_digits(rest) || rest.size() > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(std::string(rest)));
    // Another run at work, or a process that took a gone run's id: left alone.
    if (pid != ::getpid() && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    const std::string path = it->path().string();
    std::error_code ignored;
    if (holds_only_job_files(path)) {
      fs::remove_all(path, ignored);
    } else {
      print_warning(
          fmt::format("{}: left by an interrupted run, kept: it holds files that are not a job's",
                      excerpt(path)));
    }
  }
}

Result<void> sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;  // some filesystems cannot
  const int saved_errno = errno;
  ::close(fd);
  errno = saved_errno;
  if (!synced) return io_error(path, "cannot sync");
  return {};
}

/// Writes and syncs each file into the new, empty directory `staging`.
Result<void> write_files(const std::string& staging, const std::vector<JobFile>& files,
                         const std::string& shown_dir) {
  const int dir_fd = ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return io_error(staging, "cannot open");
  Result<void> result;
  for (const JobFile& f : files) {
    const int fd =
        ::openat(dir_fd, f.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    const bool written = fd >= 0 && write_all(fd, f.content) && ::fsync(fd) == 0;
    const int saved_errno = errno;
    if (fd >= 0 && (::close(fd) != 0 || !written)) {
      if (!written) errno = saved_errno;
      result = io_error((fs::path(shown_dir) / f.name).string(), "cannot write");
      break;
    }
    if (fd < 0) {
      result = io_error((fs::path(shown_dir) / f.name).string(), "cannot create");
      break;
    }
  }
  if (result && ::fsync(dir_fd) != 0 && errno != EINVAL) result = io_error(staging, "cannot sync");
  ::close(dir_fd);
  return result;
}

/// Puts `staging` in `target`'s place. Returns the path that now holds the old job ("" when
/// there was none); an error with `target` unchanged.
Result<std::string> swap_in(const std::string& staging, const std::string& target,
                            const std::string& aside, bool target_exists,
                            const std::string& shown_dir) {
  if (!target_exists) {
    if (::rename(staging.c_str(), target.c_str()) != 0) return io_error(shown_dir, "cannot create");
    return std::string();
  }
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    return staging;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    return io_error(shown_dir, "cannot replace");
  }
#endif
  // No exchange here: the old job aside, then the new one in (nothing at `target` between).
  if (::rename(target.c_str(), aside.c_str()) != 0) return io_error(shown_dir, "cannot replace");
  if (::rename(staging.c_str(), target.c_str()) != 0) {
    Error e = io_error(shown_dir, "cannot replace");
    ::rename(aside.c_str(), target.c_str());
    return e;
  }
  return aside;
}

}  // namespace

bool is_job_file_name(std::string_view name) {
  if (name == "job.json" || name == kConfigCopy) return true;
  // stageS.chunkC.manifest.json, stageS.chunkC.layout.json
  const auto take = [&](std::string_view word) {
    if (!name.starts_with(word)) return false;
    name.remove_prefix(word.size());
    return true;
  };
  const auto take_number = [&] {
    std::size_t n = 0;
    while (n < name.size() && name[n] >= '0' && name[n] <= '9') ++n;
    name.remove_prefix(n);
    return n > 0;
  };
  return take("stage") && take_number() && take(".chunk") && take_number() &&
         (name == ".manifest.json" || name == ".layout.json");
}

Result<void> write_job_directory(const std::string& dir, const std::vector<JobFile>& files,
                                 bool replace_foreign) {
  for (const JobFile& f : files) {
    if (!is_job_file_name(f.name)) {
      return Error{fmt::format("{}: not the name of a job's file", excerpt(f.name))};
    }
  }
  Result<Place> place = locate(dir);
  if (!place) return place.error();
  if (Result<void> made = make_output_directory(place->parent); !made) return made;
  const std::string target = place->path();
  Result<std::optional<mode_t>> existing = check_existing(dir, target, replace_foreign);
  if (!existing) return existing.error();
  remove_leftovers(*place);

  const std::string pid = std::to_string(::getpid());
  const std::string staging = place->parent + "/." + place->name + std::string(kNewTag) + pid;
  const std::string aside = place->parent + "/." + place->name + std::string(kOldTag) + pid;
  std::optional<RemovedOnSignal> guard;
  {
    // No signal between creating the directory and guarding it.
    const FatalSignalsBlocked blocked;
    if (::mkdir(staging.c_str(), 0777) != 0) {
      return Error{fmt::format("{}: cannot write the new job beside it, in {}: {}", excerpt(dir),
                               excerpt(staging), std::strerror(errno))};
    }
    guard.emplace(staging, RemovedOnSignal::Kind::directory);
  }
  const auto abandon = [&](Error e) -> Result<void> {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    return e;
  };
  if (Result<void> written = write_files(staging, files, dir); !written) {
    return abandon(written.error());
  }
  if (existing->has_value()) ::chmod(staging.c_str(), **existing);

  std::string old_job;
  {
    // The exchange and the guard's new charge in one step: a signal after it removes the
    // old job, never the new one; and the old job only if nothing but a job's files came
    // into it meanwhile (or --replace).
    const FatalSignalsBlocked blocked;
    Result<std::string> swapped = swap_in(staging, target, aside, existing->has_value(), dir);
    if (!swapped) return abandon(swapped.error());
    old_job = *swapped;
    if (!old_job.empty() && !replace_foreign && !holds_only_job_files(old_job)) old_job.clear();
    guard->guard(old_job, RemovedOnSignal::Kind::directory);
  }
  Result<void> synced = sync_directory(place->parent);
  std::error_code ignored;
  if (!old_job.empty()) fs::remove_all(old_job, ignored);
  return synced;
}

}  // namespace paramlayout::cli
