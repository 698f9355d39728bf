// Upstream references are Megatron-LM d98e8a64.
#include "paramlayout/ddp_log.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <map>
#include <regex>

namespace paramlayout {
namespace {

// param_and_grad_buffer.py:1421-1433, the report's lines as Megatron-LM formats them.
constexpr std::string_view kBucketCount =
    "Number of buckets for gradient all-reduce / reduce-scatter: ";
constexpr std::string_view kBucket = "Params for bucket ";
constexpr std::string_view kMainGrad = " (param.main_grad.dtype=torch.";
// training.py:2447-2448
constexpr std::string_view kParamCount = "number of parameters on (";
// training/utils/common_utils.py:321-334
constexpr std::string_view kMemory = " memory (MB) | allocated: ";

std::optional<std::int64_t> number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::string_view digits_at(std::string_view text, std::size_t at) {
  std::size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  return text.substr(at, end - at);
}

/// A launcher's prefix on one line: the stream it names, the rank, and the line without it.
struct Prefixed {
  std::string_view stream;
  std::optional<std::int64_t> rank;
  std::string_view rest;
};

/// torchrun's `[rank3]:` and `[default3]:`, mpirun's `[1,3]<stdout>:`, srun's `3: `.
Prefixed split_prefix(std::string_view line) {
  if (line.starts_with('[')) {
    const std::size_t close = line.find("]");
    if (close != std::string_view::npos && close < 32) {
      const std::string_view inside = line.substr(1, close - 1);
      std::size_t tag_end = close + 1;
      const std::string_view tag = line.substr(tag_end);
      if (tag.starts_with("<stdout>") || tag.starts_with("<stderr>")) {
        tag_end += 8;
      }
      if (tag_end < line.size() && line[tag_end] == ':') {
        std::size_t at = inside.find(',');
        at = at == std::string_view::npos ? 0 : at + 1;
        const std::size_t word = at;
        while (at < inside.size() && std::isalpha(static_cast<unsigned char>(inside[at]))) ++at;
        const std::string_view rank = digits_at(inside, at);
        if (!rank.empty() && at + rank.size() == inside.size()) {
          // `[default3]:` numbers the node's local ranks: a stream, not a global rank.
          const std::string_view name = inside.substr(word, at - word);
          const bool global = name.empty() || name == "rank";
          return {line.substr(0, tag_end + 1), global ? number(rank) : std::nullopt,
                  line.substr(tag_end + 1)};
        }
      }
    }
  }
  const std::string_view rank = digits_at(line, 0);
  if (!rank.empty() && line.substr(rank.size()).starts_with(": ")) {
    return {line.substr(0, rank.size() + 2), number(rank), line.substr(rank.size() + 2)};
  }
  return {"", std::nullopt, line};
}

/// One stream's report being read.
struct OpenReport {
  LoggedBuffer buffer;
  std::int64_t announced = 0;
};

class LogReader {
 public:
  LogReader(const std::string& source, DdpLog& log) : source_(source), log_(log) {}

  Result<void> line(std::int64_t at, std::string_view text) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    const Prefixed p = split_prefix(text);
    const auto open = open_.find(std::string(p.stream));
    if (const std::size_t found = p.rest.find(kBucketCount); found != std::string_view::npos) {
      if (open != open_.end()) {
        if (Result<void> closed = close(open); !closed) return closed;
      }
      const std::optional<std::int64_t> n =
          number(trim(p.rest.substr(found + kBucketCount.size())));
      if (!n) return fail(at, "the bucket count is not a number");
      OpenReport report;
      report.buffer.place = {source_, at, p.rank};
      report.announced = *n;
      open_.emplace(std::string(p.stream), std::move(report));
      return {};
    }
    if (open != open_.end()) {
      OpenReport& report = open->second;
      const std::string_view body = trim(p.rest);
      if (body.starts_with(kBucket)) return bucket(at, report, body.substr(kBucket.size()));
      if (body.find(kMainGrad) != std::string_view::npos) return param(at, report, body);
      // The report's message has ended.
      if (Result<void> closed = close(open); !closed) return closed;
    }
    if (const std::size_t found = p.rest.find(kParamCount); found != std::string_view::npos) {
      return param_count(at, p, p.rest.substr(found + kParamCount.size()));
    }
    if (p.rest.find(kMemory) != std::string_view::npos) memory(at, p);
    return {};
  }

  Result<void> finish() {
    while (!open_.empty()) {
      if (Result<void> closed = close(open_.begin()); !closed) return closed;
    }
    return {};
  }

 private:
  Error fail(std::int64_t at, std::string_view what) const {
    return Error{fmt::format("{}:{}: {}", source_, at, what)};
  }

  Result<void> bucket(std::int64_t at, OpenReport& report, std::string_view rest) {
    // "K (E elements, P padded size, X param(s) with extra main_grads):"
    const std::string_view k = digits_at(rest, 0);
    const std::int64_t expected = static_cast<std::int64_t>(report.buffer.buckets.size()) + 1;
    if (number(k) != expected || expected > report.announced) {
      return fail(at, fmt::format("bucket {} where the report of line {} expects bucket {} of {}",
                                  k, report.buffer.place.line, expected, report.announced));
    }
    std::int64_t values[3] = {0, 0, 0};
    constexpr std::string_view kAfter[3] = {" elements, ", " padded size, ",
                                            " param(s) with extra main_grads):"};
    std::string_view cursor = rest.substr(k.size());
    if (!cursor.starts_with(" (")) return fail(at, "a bucket line Megatron-LM does not write");
    cursor.remove_prefix(2);
    for (int i = 0; i < 3; ++i) {
      const std::string_view n = digits_at(cursor, 0);
      if (n.empty() || !cursor.substr(n.size()).starts_with(kAfter[i])) {
        return fail(at, "a bucket line Megatron-LM does not write");
      }
      values[i] = *number(n);
      cursor.remove_prefix(n.size() + kAfter[i].size());
    }
    report.buffer.buckets.push_back({values[0], values[1], values[2], {}});
    return {};
  }

  Result<void> param(std::int64_t at, OpenReport& report, std::string_view rest) {
    if (report.buffer.buckets.empty()) return fail(at, "a param line before any bucket line");
    const std::size_t mark = rest.rfind(kMainGrad);
    std::string_view dtype = rest.substr(mark + kMainGrad.size());
    if (!dtype.ends_with(")")) return fail(at, "a param line Megatron-LM does not write");
    dtype.remove_suffix(1);
    report.buffer.buckets.back().params.push_back(
        {std::string(rest.substr(0, mark)), std::string(dtype)});
    return {};
  }

  Result<void> param_count(std::int64_t at, const Prefixed& p, std::string_view rest) {
    // "tensor, gtp_weight_remat, pipeline) model parallel rank (0, 0, 3): 123"
    const std::size_t names_end = rest.find(')');
    const std::size_t open = rest.find('(', names_end == std::string_view::npos ? 0 : names_end);
    const std::size_t close = open == std::string_view::npos ? open : rest.find("): ", open);
    if (names_end == std::string_view::npos || close == std::string_view::npos) {
      return fail(at, "a param count line Megatron-LM does not write");
    }
    const std::vector<std::string_view> names = split(rest.substr(0, names_end), ',');
    const std::vector<std::string_view> ranks = split(rest.substr(open + 1, close - open - 1), ',');
    const std::optional<std::int64_t> count = number(trim(rest.substr(close + 3)));
    LoggedParamCount out{{source_, at, p.rank}, -1, -1, count.value_or(0)};
    for (std::size_t i = 0; i < names.size() && i < ranks.size(); ++i) {
      const std::optional<std::int64_t> r = number(trim(ranks[i]));
      if (trim(names[i]) == "tensor" && r) out.tp_rank = *r;
      if (trim(names[i]) == "pipeline" && r) out.pp_rank = *r;
    }
    if (!count || out.tp_rank < 0 || out.pp_rank < 0 || names.size() != ranks.size()) {
      return fail(at, "a param count line Megatron-LM does not write");
    }
    log_.param_counts.push_back(std::move(out));
    return {};
  }

  /// "[Rank 3] (after 2 iterations) memory (MB) | allocated: 1.50 | max allocated: 2.25 |
  /// ...": reports at other moments (around a checkpoint's save) are not read.
  void memory(std::int64_t at, const Prefixed& p) {
    static const std::regex kReport(
        R"(\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\) \| allocated: ([0-9.]+) \| )"
        R"(max allocated: ([0-9.]+)\b)");
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(p.rest.begin(), p.rest.end(), m, kReport)) return;
    log_.memory.push_back({{source_, at, p.rank},
                           std::stoll(m[1].str()),
                           std::stoll(m[2].str()),
                           std::stod(m[3].str()),
                           std::stod(m[4].str())});
  }

  Result<void> close(std::map<std::string, OpenReport>::iterator open) {
    OpenReport report = std::move(open->second);
    open_.erase(open);
    const auto given = static_cast<std::int64_t>(report.buffer.buckets.size());
    if (given != report.announced) {
      return fail(report.buffer.place.line,
                  fmt::format("the report announces {} bucket{} and gives {}", report.announced,
                              report.announced == 1 ? "" : "s", given));
    }
    for (std::size_t i = 0; i < report.buffer.buckets.size(); ++i) {
      if (report.buffer.buckets[i].params.empty()) {
        return fail(report.buffer.place.line, fmt::format("bucket {} lists no param", i + 1));
      }
    }
    log_.buffers.push_back(std::move(report.buffer));
    return {};
  }

  static std::vector<std::string_view> split(std::string_view text, char by) {
    std::vector<std::string_view> out;
    for (std::size_t start = 0;;) {
      const std::size_t end = text.find(by, start);
      out.push_back(text.substr(start, end - start));
      if (end == std::string_view::npos) return out;
      start = end + 1;
    }
  }

  static std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
      text.remove_prefix(1);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
      text.remove_suffix(1);
    }
    return text;
  }

  const std::string& source_;
  DdpLog& log_;
  std::map<std::string, OpenReport> open_;  ///< by the launcher prefix of its stream
};

}  // namespace

std::string LogPlace::describe() const {
  return rank ? fmt::format("{}:{} rank {}", source, line, *rank)
              : fmt::format("{}:{}", source, line);
}

Result<void> read_ddp_log(std::string_view text, const std::string& source, DdpLog& log) {
  LogReader reader(source, log);
  std::int64_t at = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (Result<void> read = reader.line(++at, text.substr(start, end - start)); !read) return read;
    start = end + 1;
  }
  return reader.finish();
}

}  // namespace paramlayout
