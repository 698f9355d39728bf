// Built when Meson finds no MPI: one process, and a clear error under a launcher.
#include "peers.hpp"

namespace paramlayout::verify {

Result<std::unique_ptr<Peers>> join_peers() {
  if (const int n = launched_processes(); n > 1) {
    return Error{"started as one of " + std::to_string(n) +
                 " MPI processes, but this paramlayout was built without MPI (install "
                 "libopenmpi-dev and rebuild), so each would verify alone"};
  }
  return solo_peers();
}

}  // namespace paramlayout::verify
