// Run under `mpirun -np 3`: the MPI Peers agree on failures and combine results the same way
// on every process. Prints one line per broken expectation; exits 1 if any.
#include <cstdio>
#include <string>

#include "verify/peers.hpp"

using paramlayout::verify::Peers;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int rank) {
  if (ok) return;
  std::printf("rank %d: %s\n", rank, what);
  ++failures;
}

}  // namespace

int main() {
  auto joined = paramlayout::verify::join_peers();
  if (!joined) {
    std::printf("%s\n", joined.error().message.c_str());
    return 1;
  }
  Peers& peers = **joined;
  const int r = peers.rank();
  expect(peers.size() == 3, "three processes", r);
  expect(peers.local_rank() == r, "one node: local rank is rank", r);

  expect(!peers.first_failure(std::nullopt), "no failure when none failed", r);
  const std::optional<std::string> later = peers.first_failure(
      r >= 1 ? std::optional<std::string>("boom " + std::to_string(r)) : std::nullopt);
  expect(later == "rank 1: boom 1", "the lowest failing rank's message, named", r);
  const std::optional<std::string> first =
      peers.first_failure(r == 0 ? std::optional<std::string>("zero") : std::nullopt);
  expect(first == "zero", "rank 0's message as it is", r);

  expect(peers.sum(r + 1) == 6, "sum", r);
  expect(peers.max(1.5 * r) == 3.0, "max", r);
  int value = r == 0 ? 42 : -1;
  peers.broadcast(&value, sizeof value);
  expect(value == 42, "broadcast from rank 0", r);
  const auto all = peers.all_gather(std::string(static_cast<std::size_t>(r + 1), char('a' + r)));
  expect(all.size() == 3 && all[0] == "a" && all[1] == "bb" && all[2] == "ccc",
         "all_gather by rank", r);
  expect(peers.all_gather("").size() == 3, "all_gather of nothing", r);
  return failures == 0 ? 0 : 1;
}
