// Shared helpers for the unit tests.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "paramlayout/error.hpp"

namespace paramlayout::test {

/// The source tree's root, for testdata/ and schemas/.
inline std::string source_path(const std::string& relative) {
  return std::string(PARAMLAYOUT_SOURCE_ROOT) + "/" + relative;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// The value of a Result that the test expects to succeed (fails the test otherwise).
template <class T>
T expect_ok(Result<T> result) {
  if (!result) FAIL(result.error().message);
  return std::move(result).value();
}

}  // namespace paramlayout::test
