#include "flags.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "paramlayout/error.hpp"
#include "paramlayout/manifest.hpp"

namespace paramlayout::cli {

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  std::string range = max == std::numeric_limits<std::int64_t>::max()
                          ? fmt::format("an integer >= {}", min)
                          : fmt::format("an integer in [{}, {}]", min, max);
  return CLI::Validator(
      [min, max, range](const std::string& text) -> std::string {
        std::optional<std::int64_t> v = parse_integer(text);
        if (v && *v >= min && *v <= max) return {};
        return fmt::format("expected {}, got '{}'", range, excerpt(text));
      },
      "");
}

CLI::Validator byte_size(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::string_view digits = text;
        std::uint64_t unit = 1;
        if (!digits.empty()) {
          switch (digits.back()) {
            case 'K':
            case 'k':
              unit = std::uint64_t{1} << 10;
              break;
            case 'M':
            case 'm':
              unit = std::uint64_t{1} << 20;
              break;
            case 'G':
            case 'g':
              unit = std::uint64_t{1} << 30;
              break;
            default:
              break;
          }
          if (unit > 1) digits.remove_suffix(1);
        }
        std::uint64_t value = 0;
        const char* end = digits.data() + digits.size();
        auto [ptr, ec] = std::from_chars(digits.data(), end, value);
        std::uint64_t bytes = 0;
        if (digits.empty() || ec != std::errc() || ptr != end ||
            __builtin_mul_overflow(value, unit, &bytes) || bytes < min || bytes > max) {
          return fmt::format("expected a size in bytes from {} to {} (or with K, M, G), got '{}'",
                             min, max, excerpt(text));
        }
        text = std::to_string(bytes);
        return {};
      },
      "BYTES");
}

CLI::Validator positive_number_up_to(double max, std::string_view what) {
  return CLI::Validator(
      [max, what = std::string(what)](const std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) ||
            value <= 0 || value > max) {
          return fmt::format("expected a number of {} above 0 and at most {}, got '{}'", what, max,
                             excerpt(text));
        }
        return {};
      },
      "");
}

CLI::Validator seconds_up_to(double max) { return positive_number_up_to(max, "seconds"); }

CLI::Validator dtype_name() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        if (parse_dtype_alias(text)) return {};
        return fmt::format(
            "expected bfloat16 (bf16), float16 (fp16, half) or float32 (fp32, "
            "float), got '{}'",
            excerpt(text));
      },
      "");
}

CLI::Validator one_of(std::initializer_list<std::string_view> choices, bool or_positive_integer) {
  std::vector<std::string> words(choices.begin(), choices.end());
  std::string expected = fmt::format("{}", fmt::join(words, ", "));
  if (or_positive_integer)
    expected = "an integer >= 1 or " + expected;
  else
    expected = "one of " + expected;
  return CLI::Validator(
      [words, expected, or_positive_integer](const std::string& text) -> std::string {
        for (const std::string& w : words) {
          if (w == text) return {};
        }
        if (or_positive_integer) {
          std::optional<std::int64_t> v = parse_integer(text);
          if (v && *v >= 1) return {};
        }
        return fmt::format("expected {}, got '{}'", expected, excerpt(text));
      },
      "");
}

}  // namespace paramlayout::cli
