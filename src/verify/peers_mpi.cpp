// Peers over MPI_COMM_WORLD: one process per GPU, started by mpirun or srun.
#define OMPI_SKIP_MPICXX 1  // the C API only: MPI's deprecated C++ bindings do not build cleanly
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "peers.hpp"

namespace paramlayout::verify {
namespace {

class MpiPeers final : public Peers {
 public:
  MpiPeers() {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
  }
  ~MpiPeers() override {
    MPI_Comm_free(&node_);
    MPI_Finalize();
  }
  MpiPeers(const MpiPeers&) = delete;
  MpiPeers& operator=(const MpiPeers&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  std::optional<std::string> first_failure(const std::optional<std::string>& mine) override {
    const int candidate = mine ? rank_ : size_;
    int first = size_;
    MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == size_) return std::nullopt;
    std::string message = mine ? *mine : std::string();
    unsigned long long length = message.size();
    MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, first, MPI_COMM_WORLD);
    message.resize(length);
    MPI_Bcast(message.data(), static_cast<int>(length), MPI_CHAR, first, MPI_COMM_WORLD);
    return first == 0 ? message : "rank " + std::to_string(first) + ": " + message;
  }

  std::int64_t sum(std::int64_t value) override {
    std::int64_t total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return total;
  }

  double max(double value) override {
    double most = 0;
    MPI_Allreduce(&value, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return most;
  }

  void broadcast(void* data, std::size_t size) override {
    MPI_Bcast(data, static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD);
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_));
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> offsets(static_cast<std::size_t>(size_), 0);
    for (int r = 1; r < size_; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], lengths[r]));
    return out;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
};

}  // namespace

Result<std::unique_ptr<Peers>> join_peers() {
  if (launched_processes() <= 1) return solo_peers();
  return std::unique_ptr<Peers>(std::make_unique<MpiPeers>());
}

}  // namespace paramlayout::verify
