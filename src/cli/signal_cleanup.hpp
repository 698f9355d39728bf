// What a fatal signal removes before the process ends: the temporary file or directory being
// written, so that an interrupted command leaves nothing half-written behind.
#pragma once

#include <array>
#include <csignal>
#include <string>

namespace paramlayout::cli {

/// The signals that end the process by default and that it can catch.
inline constexpr std::array kFatalSignals = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE,
                                             SIGALRM, SIGXFSZ, SIGUSR1, SIGUSR2};

/// While alive, a catchable fatal signal (`kFatalSignals`) removes the path it guards before the
/// process ends: a file, or a directory with the files in it. One path is guarded at a time;
/// signals the process ignores stay ignored. Create the path and the guard under
/// `FatalSignalsBlocked` so that no signal falls between the two.
class RemovedOnSignal {
 public:
  enum class Kind : bool { file, directory };
  RemovedOnSignal(const std::string& path, Kind kind);
  ~RemovedOnSignal();
  RemovedOnSignal(const RemovedOnSignal&) = delete;
  RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;

  /// Guards `path` instead (nothing for ""): call it under `FatalSignalsBlocked` when the
  /// guarded path is renamed.
  void guard(const std::string& path, Kind kind);

 private:
  std::array<struct sigaction, kFatalSignals.size()> previous_{};
  std::array<bool, kFatalSignals.size()> installed_{};
};

/// While alive, the fatal signals `RemovedOnSignal` handles are held back; they are delivered
/// when it ends.
class FatalSignalsBlocked {
 public:
  FatalSignalsBlocked();
  ~FatalSignalsBlocked();
  FatalSignalsBlocked(const FatalSignalsBlocked&) = delete;
  FatalSignalsBlocked& operator=(const FatalSignalsBlocked&) = delete;

 private:
  sigset_t previous_{};
};

}  // namespace paramlayout::cli
