// This process alone, and what the launcher's environment says.
#include <cstdlib>
#include <string_view>

#include "peers.hpp"

namespace paramlayout::verify {
namespace {

class SoloPeers final : public Peers {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::optional<std::string> first_failure(const std::optional<std::string>& mine) override {
    return mine;
  }
  std::int64_t sum(std::int64_t value) override { return value; }
  double max(double value) override { return value; }
  void broadcast(void*, std::size_t) override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
};

}  // namespace

std::unique_ptr<Peers> solo_peers() { return std::make_unique<SoloPeers>(); }

int launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_STEP_NUM_TASKS"}) {
    if (const char* value = std::getenv(name)) {
      const int n = std::atoi(value);
      if (n > 0) return n;
    }
  }
  return 1;
}

}  // namespace paramlayout::verify
