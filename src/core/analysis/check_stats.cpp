// check_recorded_stats: a layout's `stats` member held against the figures of its layout.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>

#include "format/json_reader.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/stats.hpp"

namespace paramlayout {
namespace {

using json::Element;
using simdjson::dom::element_type;

/// How far a written ratio may be from the figure: half a unit of its last written digit
/// (stats_to_json writes percents with 4 decimals, Newton-Schulz ratios with 6).
double tolerance(std::string_view key) {
  const bool percent = key.size() >= 8 && key.substr(key.size() - 8) == "_percent";
  return (percent ? 0.5e-4 : 0.5e-6) * (1 + 1e-9);
}

/// Compares `recorded` with `expected` (the figures as stats_to_json writes them), adding one
/// violation per value that differs. Follows `expected`'s structure only, so its depth is
/// bounded whatever `recorded` holds.
class StatsComparer {
 public:
  explicit StatsComparer(std::vector<Violation>& out) : out_(out) {}

  void compare(Element expected, Element recorded, const std::string& pointer,
               std::string_view key) {
    switch (expected.type()) {
      case element_type::OBJECT: {
        if (!recorded.is_object()) return differs(pointer, recorded, "an object");
        const simdjson::dom::object want(expected);
        for (const simdjson::dom::key_value_pair field : want) {
          Element member;
          if (recorded.at_key(field.key).get(member) != simdjson::SUCCESS) continue;
          compare(field.value, member, pointer + "/" + std::string(field.key), field.key);
        }
        return;
      }
      case element_type::ARRAY: {
        if (!recorded.is_array()) return differs(pointer, recorded, "an array");
        const simdjson::dom::array want(expected);
        const simdjson::dom::array got(recorded);
        if (want.size() != got.size()) {
          return add(pointer,
                     fmt::format("has {} entries, the layout gives {}", got.size(), want.size()));
        }
        std::size_t i = 0;
        for (Element item : want) {
          compare(item, got.at(i).value_unsafe(), fmt::format("{}/{}", pointer, i), key);
          ++i;
        }
        return;
      }
      case element_type::INT64:
        if (!recorded.is_int64() ||
            recorded.get_int64().value_unsafe() != expected.get_int64().value_unsafe()) {
          differs(pointer, recorded, json::Reader::describe(expected));
        }
        return;
      case element_type::DOUBLE: {
        const double want = expected.get_double().value_unsafe();
        double got = 0;
        if (recorded.get_double().get(got) != simdjson::SUCCESS ||
            !(std::fabs(got - want) <= tolerance(key))) {
          differs(pointer, recorded, json::Reader::describe(expected));
        }
        return;
      }
      default:
        if (simdjson::minify(recorded) != simdjson::minify(expected)) {
          differs(pointer, recorded, json::Reader::describe(expected));
        }
        return;
    }
  }

 private:
  void add(const std::string& pointer, std::string what) {
    out_.push_back({"", "/stats" + pointer + " " + what});
  }
  void differs(const std::string& pointer, Element recorded, std::string_view expected) {
    add(pointer,
        fmt::format("is {}, the layout gives {}", json::Reader::describe(recorded), expected));
  }

  std::vector<Violation>& out_;
};

}  // namespace

std::vector<Violation> check_recorded_stats(const Layout& layout, const Manifest& manifest) {
  std::vector<Violation> out;
  if (!layout.recorded_stats || !check_structure(layout).empty()) return out;
  const Result<LayoutStats> stats = layout_stats(layout, manifest);
  if (!stats) return out;  // figures past 64 bits: parse and plan refuse those
  simdjson::dom::parser want_parser;
  simdjson::dom::parser got_parser;
  Element want;
  Element got;
  const std::string expected = stats_to_json(*stats);
  if (want_parser.parse(expected).get(want) != simdjson::SUCCESS ||
      got_parser.parse(*layout.recorded_stats).get(got) != simdjson::SUCCESS) {
    return out;  // the recorded text was read from valid JSON; ours is valid
  }
  StatsComparer(out).compare(want, got, "", "");
  if (!out.empty()) {
    out.front().what += " (stats is derived from the layout: plan again to write it afresh)";
  }
  return out;
}

}  // namespace paramlayout
