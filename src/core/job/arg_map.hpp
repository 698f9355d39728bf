// A Megatron-LM launch line's arguments, read as Megatron-LM's argparse parser
// reads them (its argument list: argument_table.hpp): unknown arguments,
// missing or extra values, values of the wrong type or outside their choices
// are refused as argparse refuses them. Readers take the arguments they
// understand; the rest are reported as ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "argument_table.hpp"
#include "paramlayout/error.hpp"

namespace paramlayout::job {

class ArgMap {
 public:
  /// Reads `args` as argparse reads them with Megatron-LM's parser
  /// (allow_abbrev=False):
  /// "--name value...", "--name=value", flags, each argument's nargs, type and
  /// choices. Fails as argparse fails, naming each unknown argument and the
  /// closest known one.
  static Result<ArgMap> parse(const std::vector<std::string> &args);

  /// Whether the flag `name` ("--bf16", "--no-x") was given; marks it read.
  bool flag(std::string_view name);
  /// Its value as an integer in [min, max], or nullopt when absent.
  std::optional<std::int64_t> maybe_integer(std::string_view name, std::int64_t min,
                                            std::int64_t max = std::int64_t{1} << 40);
  /// The same, or `fallback` when absent.
  std::int64_t integer(std::string_view name, std::int64_t fallback, std::int64_t min,
                       std::int64_t max = std::int64_t{1} << 40);
  /// Its value as Python's float() reads it, or nullopt when absent.
  std::optional<double> maybe_real(std::string_view name);
  /// Its single value, or nullopt when absent (or given without one, nargs
  /// '?').
  std::optional<std::string> string(std::string_view name);
  /// Its values (nargs '*', '+', N), or nullopt when absent.
  std::optional<std::vector<std::string>> values(std::string_view name);
  /// Whether `name` was given (whatever its values); marks it read.
  bool has(std::string_view name);

  /// Records a problem with `name`; the first one recorded is kept.
  void fail(std::string_view name, std::string_view what);
  bool failed() const { return error_.has_value(); }
  const Error &error() const { return *error_; }

  /// The ModelOpt arguments given (ArgumentInfo::modelopt), in launch-line order.
  std::vector<std::string> modelopt_arguments() const;

  /// "--name value" for each argument nobody read, in launch-line order.
  std::vector<std::string> unread() const;

 private:
  struct Entry {
    std::string given_as;  ///< the option string last used
    std::vector<std::string> values;
    std::size_t position = 0;
    bool read = false;
  };
  Entry *find(std::string_view name);

  std::map<const ArgumentInfo *, Entry> entries_;
  std::optional<Error> error_;
};

}  // namespace paramlayout::job
