// Errors as values: the core builds each message once, with its location;
// the front end only prints it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace paramlayout {

/// A complete, printable error message, e.g.
/// `manifest.json: /params/3/shape/1: expected an integer >= 1, got -4`.
struct Error {
  std::string message;
};

/// An error located in `source` (a file name) at a JSON pointer (may be empty).
Error error_at(std::string_view source, std::string_view pointer, std::string_view what);

/// Most characters of input a message quotes; longer text is cut in the middle.
inline constexpr std::size_t kMaxExcerpt = 100;

/// Input text as a message may quote it: at most about kMaxExcerpt characters (the start
/// and the end, "..." between), control characters and invalid UTF-8 escaped as \xNN.
std::string excerpt(std::string_view text, std::size_t max = kMaxExcerpt);

/// Either a value or the Error that prevented it.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Success, or the Error that prevented it.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace paramlayout
