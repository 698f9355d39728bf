// verify's peers: how many processes the launcher started, and this process alone as its own
// peer group.
#include <doctest/doctest.h>

#include <cstdlib>
#include <memory>

#include "verify/peers.hpp"

using namespace paramlayout;

TEST_SUITE("verify") {
  TEST_CASE("the launcher's environment says how many processes were started") {
    const char* names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_STEP_NUM_TASKS"};
    for (const char* name : names) unsetenv(name);
    CHECK(verify::launched_processes() == 1);
    for (const char* name : names) {
      CAPTURE(name);
      setenv(name, "4", 1);
      CHECK(verify::launched_processes() == 4);
      unsetenv(name);
    }
    setenv("SLURM_STEP_NUM_TASKS", "not a number", 1);
    CHECK(verify::launched_processes() == 1);
    unsetenv("SLURM_STEP_NUM_TASKS");
    // This process alone: every failure is its own, every combination the value itself.
    std::unique_ptr<verify::Peers> solo = verify::solo_peers();
    CHECK(solo->size() == 1);
    CHECK(solo->first_failure(std::string("boom")) == "boom");
    CHECK(!solo->first_failure(std::nullopt));
    CHECK(solo->sum(7) == 7);
  }
}
