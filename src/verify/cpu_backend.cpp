// The cpu backend: every device is a pair of host buffers, and the collectives are loops.
// It is the reference semantics of the data pass, and runs wherever the tool does. The
// loops are instantiated per encoding (and per contributor count) so that the compiler
// turns them into vector code: verifying is bound by memory bandwidth, not by dp.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend.hpp"
#include "paramlayout/layout.hpp"
#include "paramlayout/text.hpp"

namespace paramlayout::verify {
namespace {

template <Encoding E>
using EncodingTag = std::integral_constant<Encoding, E>;

/// The storage type of an encoding's elements.
template <Encoding E>
using Storage =
    std::conditional_t<E == Encoding::float32, std::uint32_t,
                       std::conditional_t<E == Encoding::uint8, std::uint8_t, std::uint16_t>>;

/// Calls f(EncodingTag<e>{}), so that loops inside f know the encoding at compile time.
template <class F>
void with_encoding(Encoding e, F&& f) {
  switch (e) {
    case Encoding::float32:
      return f(EncodingTag<Encoding::float32>{});
    case Encoding::bfloat16:
      return f(EncodingTag<Encoding::bfloat16>{});
    case Encoding::float16:
      return f(EncodingTag<Encoding::float16>{});
    case Encoding::uint8:
      return f(EncodingTag<Encoding::uint8>{});
  }
}

template <Encoding E>
float to_float(std::uint32_t bits) {
  if constexpr (E == Encoding::float32) {
    return std::bit_cast<float>(bits);
  } else if constexpr (E == Encoding::bfloat16) {
    return std::bit_cast<float>(bits << 16);
  } else {
    const std::uint32_t sign = (bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0) {
      const float value = static_cast<float>(mantissa) * 0x1p-24f;
      return sign ? -value : value;
    }
    const std::uint32_t wide_exponent = exponent == 0x1F ? 0xFFu : exponent + 112;
    return std::bit_cast<float>(sign | wide_exponent << 23 | mantissa << 13);
  }
}

/// Rounds to nearest even. float16 results below its normal range flush to zero: the sums
/// verify makes are integers >= 1.
template <Encoding E>
std::uint32_t from_float(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if constexpr (E == Encoding::float32) {
    return bits;
  } else if constexpr (E == Encoding::bfloat16) {
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFu;
    return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  } else {
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const std::uint32_t wide_exponent = (bits >> 23) & 0xFFu;
    const std::uint32_t mantissa = bits & 0x7FFFFFu;
    if (wide_exponent == 0xFF) return sign | 0x7C00u | (mantissa ? 0x200u : 0u);
    const int exponent = static_cast<int>(wide_exponent) - 112;
    if (exponent >= 0x1F) return sign | 0x7C00u;
    if (exponent <= 0) return sign;
    std::uint32_t half = sign | static_cast<std::uint32_t>(exponent) << 10 | mantissa >> 13;
    const std::uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return half;
  }
}

/// Gradient sums of K contributors at a segment's elements, handed to `visit(k, bits)`.
template <Encoding E, int K, class Visit>
void sums(const ValueRule& rule, std::int64_t element, std::int64_t length, Visit&& visit) {
  for (std::int64_t k = 0; k < length; ++k) {
    std::uint32_t sum = 0;
    for (int j = 0; j < K; ++j) sum += contribution_at(rule.seeds[j], element + k, rule.mask);
    visit(k, integer_bits(sum, E));
  }
}

/// The bits of every element of a segment, handed to `visit(k, bits)`; the rule's branches
/// are taken once per segment, not per element.
template <Encoding E, class Visit>
void each_value(const ValueRule& rule, std::int64_t element, std::int64_t length, Visit&& visit) {
  if (rule.param < 0 || (!rule.copied && rule.count == 0)) {
    for (std::int64_t k = 0; k < length; ++k) visit(k, std::uint32_t{0});
  } else if (rule.copied) {
    for (std::int64_t k = 0; k < length; ++k) visit(k, param_bits(rule.param, element + k, E));
  } else if (rule.count == 1) {
    sums<E, 1>(rule, element, length, visit);
  } else if (rule.count == 2) {
    sums<E, 2>(rule, element, length, visit);
  } else if (rule.count == 3) {
    sums<E, 3>(rule, element, length, visit);
  } else {
    sums<E, 4>(rule, element, length, visit);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Runs f(begin, end) over [0, n) split among the machine's cores.
template <class F>
void parallel_ranges(std::int64_t n, F&& f) {
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(std::thread::hardware_concurrency(), n >> 16), 1, 64);
  std::vector<std::jthread> workers;
  for (std::int64_t t = 1; t < threads; ++t) {
    workers.emplace_back([&f, n, t, threads] { f(n * t / threads, n * (t + 1) / threads); });
  }
  f(0, n / threads);
}

/// Calls f(segment) for the parts of `segments` (sorted, covering their buffer) inside
/// positions [begin, end).
template <class F>
void for_segments_in(const std::vector<Segment>& segments, std::int64_t begin, std::int64_t end,
                     F&& f) {
  auto it =
      std::upper_bound(segments.begin(), segments.end(), begin,
                       [](std::int64_t x, const Segment& s) { return x < s.begin + s.length; });
  for (; it != segments.end() && it->begin < end; ++it) {
    const std::int64_t from = std::max(begin, it->begin);
    const std::int64_t to = std::min(end, it->begin + it->length);
    f(Segment{from, to - from, it->param, it->element + (from - it->begin)});
  }
}

/// Calls f(segment) for every part of `segments`, split among the machine's cores.
template <class F>
void for_segments(const std::vector<Segment>& segments, std::int64_t size, F&& f) {
  parallel_ranges(size, [&](std::int64_t begin, std::int64_t end) {
    for_segments_in(segments, begin, end, f);
  });
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::int64_t devices) : devices_(devices) {}

  std::string describe() const override {
    return fmt::format("cpu, {} simulated device{}", devices_, devices_ == 1 ? "" : "s");
  }
  std::int64_t devices() const override { return devices_; }
  std::int64_t preferred_block_elements() const override {
    // All buffers together: 2 * devices * (devices * block) * 4 bytes, about 256 MiB.
    return std::max<std::int64_t>(1 << 16, (std::int64_t{1} << 25) / (devices_ * devices_));
  }

  Result<void> reserve(std::int64_t length) override {
    // Send and receive buffers of `devices` blocks per device, 4 bytes an element at most.
    std::optional<std::int64_t> total = checked_mul(length, 8 * devices_);
    if (total) total = checked_mul(*total, devices_);
    const auto memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (!total || static_cast<double>(*total) > memory) {
      return Error{fmt::format(
          "the cpu backend would need {} of buffers for blocks of {} elements on {} devices, "
          "more than this machine's memory: lower --chunk-elements or --gpus",
          total ? human_bytes(static_cast<double>(*total)) : std::string("over 8 EiB"), length,
          devices_)};
    }
    const auto bytes = static_cast<std::size_t>(devices_ * length) * 4;
    send_.clear();
    recv_.clear();
    for (std::int64_t d = 0; d < devices_; ++d) {
      send_.push_back(std::make_unique_for_overwrite<std::byte[]>(bytes));
      recv_.push_back(std::make_unique_for_overwrite<std::byte[]>(bytes));
    }
    sum_ = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(length));
    return {};
  }

  Result<double> fill(const Round& round) override {
    const auto start = std::chrono::steady_clock::now();
    with_encoding(round.encoding, [&]<Encoding E>(EncodingTag<E>) {
      using T = Storage<E>;
      for (std::int64_t d = 0; d < round.devices; ++d) {
        T* out = buffer<T>(send_, d);
        const std::vector<Segment>& sent =
            round.kind == RoundKind::grads ? round.all_blocks : round.own_block[d];
        const bool grads = round.kind == RoundKind::grads;
        const std::int64_t sent_size = grads ? round.devices * round.length : round.length;
        const std::int64_t received_size = grads ? round.length : round.devices * round.length;
        for_segments(sent, sent_size, [&](const Segment& s) {
          T* at = out + s.begin;
          each_value<E>(sent_values(round, d, s), s.element, s.length,
                        [at](std::int64_t k, std::uint32_t bits) { at[k] = static_cast<T>(bits); });
        });
        T* in = buffer<T>(recv_, d);
        parallel_ranges(received_size, [in](std::int64_t begin, std::int64_t end) {
          std::fill(in + begin, in + end, static_cast<T>(poison_bits(E)));
        });
      }
    });
    return seconds_since(start);
  }

  Result<double> collective(const Round& round) override {
    const auto start = std::chrono::steady_clock::now();
    with_encoding(round.encoding, [&]<Encoding E>(EncodingTag<E>) {
      using T = Storage<E>;
      const std::int64_t n = round.length;
      for (std::int64_t d = 0; d < round.devices; ++d) {
        T* out = buffer<T>(recv_, d);
        if (round.kind == RoundKind::params) {
          for (std::int64_t h = 0; h < round.devices; ++h) {
            std::memcpy(out + h * n, buffer<T>(send_, h), static_cast<std::size_t>(n) * sizeof(T));
          }
          continue;
        }
        float* sum = sum_.get();
        parallel_ranges(n, [&](std::int64_t begin, std::int64_t end) {
          std::fill(sum + begin, sum + end, 0.0f);
          for (std::int64_t h = 0; h < round.devices; ++h) {
            const T* in = buffer<T>(send_, h) + d * n;
            for (std::int64_t k = begin; k < end; ++k) sum[k] += to_float<E>(in[k]);
          }
          for (std::int64_t k = begin; k < end; ++k) out[k] = static_cast<T>(from_float<E>(sum[k]));
        });
      }
    });
    return seconds_since(start);
  }

  Result<CheckResult> check(const Round& round) override {
    const auto start = std::chrono::steady_clock::now();
    CheckResult result;
    with_encoding(round.encoding, [&]<Encoding E>(EncodingTag<E>) {
      using T = Storage<E>;
      for (std::int64_t d = 0; d < round.devices; ++d) {
        const T* in = buffer<T>(recv_, d);
        const std::vector<Segment>& received =
            round.kind == RoundKind::grads ? round.own_block[d] : round.all_blocks;
        const std::int64_t received_size =
            round.kind == RoundKind::grads ? round.length : round.devices * round.length;
        std::mutex merge;
        parallel_ranges(received_size, [&](std::int64_t begin, std::int64_t end) {
          CheckResult part;
          for_segments_in(received, begin, end, [&](const Segment& s) {
            const ValueRule rule = expected_values(round, s);
            const T* at = in + s.begin;
            std::int64_t wrong = 0;
            each_value<E>(rule, s.element, s.length,
                          [at, &wrong](std::int64_t k, std::uint32_t bits) {
                            wrong += at[k] != static_cast<T>(bits);
                          });
            if (wrong == 0) return;
            part.mismatches += wrong;
            each_value<E>(rule, s.element, s.length, [&](std::int64_t k, std::uint32_t bits) {
              if (at[k] == static_cast<T>(bits) || part.first.size() >= kKeptMismatches) return;
              part.first.push_back({d, s.begin + k, s.param, s.element + k, bits, at[k]});
            });
          });
          const std::scoped_lock lock(merge);
          result.mismatches += part.mismatches;
          result.first.insert(result.first.end(), part.first.begin(), part.first.end());
        });
      }
    });
    // Each part kept its first mismatches by position, so these are the first of all.
    std::sort(result.first.begin(), result.first.end(), [](const Mismatch& a, const Mismatch& b) {
      return std::pair(a.device, a.position) < std::pair(b.device, b.position);
    });
    if (result.first.size() > kKeptMismatches) result.first.resize(kKeptMismatches);
    result.seconds = seconds_since(start);
    return result;
  }

 private:
  template <class T>
  static T* buffer(const std::vector<std::unique_ptr<std::byte[]>>& buffers, std::int64_t d) {
    return reinterpret_cast<T*>(buffers[static_cast<std::size_t>(d)].get());
  }

  std::int64_t devices_;
  std::vector<std::unique_ptr<std::byte[]>> send_;
  std::vector<std::unique_ptr<std::byte[]>> recv_;
  std::unique_ptr<float[]> sum_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::int64_t devices) {
  return std::make_unique<CpuBackend>(std::max<std::int64_t>(devices, 1));
}

}  // namespace paramlayout::verify
