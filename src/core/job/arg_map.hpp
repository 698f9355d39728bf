// A Megatron-LM launch line's arguments, as argparse reads them: "--name value...",
// "--name=value" or a bare "--flag". Readers take the arguments they understand; the rest
// are reported as ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paramlayout/error.hpp"

namespace paramlayout::job {

class ArgMap {
 public:
  /// Splits `args` into arguments and their values. Fails on a value with no argument.
  static Result<ArgMap> parse(const std::vector<std::string>& args);

  /// Whether `name` ("--bf16") was given; marks it read. Fails if it was given a value.
  bool flag(std::string_view name);
  /// Its value as an integer in [min, max], or nullopt when absent.
  std::optional<std::int64_t> maybe_integer(std::string_view name, std::int64_t min,
                                            std::int64_t max = std::int64_t{1} << 40);
  /// The same, or `fallback` when absent.
  std::int64_t integer(std::string_view name, std::int64_t fallback, std::int64_t min,
                       std::int64_t max = std::int64_t{1} << 40);
  /// Its single value, or nullopt when absent.
  std::optional<std::string> string(std::string_view name);
  /// Whether `name` was given (whatever its values); marks it read.
  bool has(std::string_view name);

  /// Records a problem with `name`; the first one recorded is kept.
  void fail(std::string_view name, std::string_view what);
  bool failed() const { return error_.has_value(); }
  const Error& error() const { return *error_; }

  /// "--name value" for each argument nobody read, in launch-line order.
  std::vector<std::string> unread() const;

 private:
  struct Entry {
    std::vector<std::string> values;
    std::size_t position = 0;
    bool read = false;
  };
  Entry* find(std::string_view name);

  std::map<std::string, Entry, std::less<>> entries_;
  std::optional<Error> error_;
};

}  // namespace paramlayout::job
