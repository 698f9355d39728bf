// The data pass on a given backend (tests use it with backends that break on purpose).
#pragma once

#include "backend.hpp"
#include "paramlayout/verify.hpp"

namespace paramlayout::verify {

/// Fills, moves and checks every bucket of `layout` on `backend`, appending to `report`.
/// Expects a layout that passed the static check against `manifest`.
Result<void> run_data_pass(const Layout& layout, const Manifest& manifest, Backend& backend,
                           const VerifyOptions& options, VerifyReport& report);

}  // namespace paramlayout::verify
