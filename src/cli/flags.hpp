// CLI11 validators whose messages read like the rest of the tool's errors.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace paramlayout::cli {

/// Parses a whole string as a decimal integer.
std::optional<std::int64_t> parse_integer(std::string_view text);

/// Accepts integers in [min, max]: "expected an integer in [1, 1048576], got 'x'".
CLI::Validator integer_in(std::int64_t min, std::int64_t max);

/// Accepts a byte count in [min, max], with an optional suffix K, M or G (powers of 1024),
/// and replaces it by the plain number.
CLI::Validator byte_size(std::uint64_t min, std::uint64_t max);

/// Accepts a finite number of seconds in (0, max].
CLI::Validator seconds_up_to(double max);

/// Accepts a finite number in (0, max], named `what` in the message ("Gb/s").
CLI::Validator positive_number_up_to(double max, std::string_view what);

/// Accepts a param dtype as torch and Megatron-LM users write it (parse_dtype_alias).
CLI::Validator dtype_name();

/// Accepts one of `choices`; with `or_positive_integer`, also any integer >= 1.
CLI::Validator one_of(std::initializer_list<std::string_view> choices,
                      bool or_positive_integer = false);

}  // namespace paramlayout::cli
