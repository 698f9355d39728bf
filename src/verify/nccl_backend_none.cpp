// Built when Meson finds no CUDA toolkit or NCCL: the nccl backend explains its absence.
#include "backend.hpp"

namespace paramlayout::verify {

Result<std::unique_ptr<Backend>> make_nccl_backend(int, double, Peers&) {
  return Error{"no CUDA device was found: this paramlayout was built without CUDA and NCCL"};
}

}  // namespace paramlayout::verify
