#include "flags.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <vector>

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
        return fmt::format("expected {}, got '{}'", range, text);
      },
      "");
}

CLI::Validator one_of(std::initializer_list<std::string_view> choices,
                      bool or_positive_integer) {
  std::vector<std::string> words(choices.begin(), choices.end());
  std::string expected = fmt::format("{}", fmt::join(words, ", "));
  if (or_positive_integer) expected = "an integer >= 1 or " + expected;
  else expected = "one of " + expected;
  return CLI::Validator(
      [words, expected, or_positive_integer](const std::string& text) -> std::string {
        for (const std::string& w : words) {
          if (w == text) return {};
        }
        if (or_positive_integer) {
          std::optional<std::int64_t> v = parse_integer(text);
          if (v && *v >= 1) return {};
        }
        return fmt::format("expected {}, got '{}'", expected, text);
      },
      "");
}

}  // namespace paramlayout::cli
