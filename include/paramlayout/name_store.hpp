// Storage for the text of many short names.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace paramlayout {

/// Keeps the text of param names for the slots that view it: one allocation per 64 KiB
/// rather than per name. Never gives memory back before it dies, so views stay valid.
class NameStore {
 public:
  /// A copy of `name` that lives as long as this store.
  std::string_view add(std::string_view name);

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace paramlayout
