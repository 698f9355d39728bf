// Built when Meson finds no CUDA toolkit or NCCL: the nccl backend explains its absence.
#include "backend.hpp"

namespace paramlayout::verify {

bool nccl_backend_built() { return false; }

Result<std::unique_ptr<Backend>> make_nccl_backend(int, double) {
  return Error{"this paramlayout was built without CUDA and NCCL (no CUDA device can be used)"};
}

}  // namespace paramlayout::verify
