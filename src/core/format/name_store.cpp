#include "paramlayout/name_store.hpp"

#include <algorithm>

namespace paramlayout {

std::string_view NameStore::add(std::string_view name) {
  if (name.size() > left_) {
    constexpr std::size_t kBlock = 64 * 1024;
    const std::size_t size = std::max(kBlock, name.size());
    blocks_.push_back(std::make_unique<char[]>(size));
    next_ = blocks_.back().get();
    left_ = size;
  }
  std::copy(name.begin(), name.end(), next_);
  const std::string_view stored(next_, name.size());
  next_ += name.size();
  left_ -= name.size();
  return stored;
}

}  // namespace paramlayout
