#include "memory_table.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "paramlayout/text.hpp"

namespace paramlayout::cli {
namespace {

std::string bytes_text(std::int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

/// "+23.4 GiB" of room or "-5.1 GiB" missing.
std::string room_text(std::int64_t room) {
  return (room >= 0 ? "+" : "-") + bytes_text(room >= 0 ? room : -room);
}

}  // namespace

std::int64_t GpuMemoryOptions::headroom_bytes() const {
  return std::llround(headroom_gib * static_cast<double>(1 << 30));
}

void add_gpu_memory_options(CLI::App& sub, GpuMemoryOptions& options) {
  sub.add_option("--gpu-memory", options.gpu,
                 "Say whether each stage's peak fits this GPU: GiB, or H100, H200, B200, "
                 "A100-40, A100-80")
      ->type_name("GIB|GPU");
  sub.add_option("--headroom", options.headroom_gib,
                 "GiB set aside on the GPU for what the figures do not model (NCCL, CUDA "
                 "context, workspaces, fragmentation)")
      ->type_name("GIB")
      ->check(CLI::Range(0.0, 1024.0))
      ->capture_default_str();
}

Result<std::optional<GpuBudget>> gpu_budget(const GpuMemoryOptions& options) {
  const std::string& text = options.gpu;
  if (text.empty()) return std::optional<GpuBudget>{};
  if (const std::optional<KnownGpu> known = find_gpu(text)) {
    return std::optional<GpuBudget>{GpuBudget{std::string(known->name), known->bytes}};
  }
  double gib = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), gib);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(gib) || gib <= 0 ||
      gib > 1 << 20) {
    return Error{fmt::format("--gpu-memory: expected GiB (a number > 0) or a GPU ({}), got '{}'",
                             known_gpu_names(), text)};
  }
  return std::optional<GpuBudget>{GpuBudget{"", std::llround(gib * static_cast<double>(1 << 30))}};
}

void print_memory_table(std::FILE* out, const std::string& inputs,
                        const std::vector<RankMemory>& stages, const std::optional<GpuBudget>& gpu,
                        std::int64_t headroom) {
  const bool estimated = !stages.empty() && stages.front().has_activations();
  fmt::print(out,
             "\n  memory per rank: persistent exact (DDP's buffers, optimizer state, "
             "model buffers), ");
  if (estimated) {
    fmt::print(out, "activations and peak estimated\n    for {}\n", inputs);
  } else {
    fmt::print(out, "activations and peak need --seq-length\n");
  }
  // One row: the room column only where there is room to say (no trailing blanks).
  const auto row = [&](const auto& stage, const std::string& in_flight,
                       const std::string& persistent, const std::string& activations,
                       const std::string& peak, const std::string& room) {
    fmt::print(out, "  {:>5} {:>9}  {:>12} {:>12} {:>12}", stage, in_flight, persistent,
               activations, peak);
    if (!room.empty()) fmt::print(out, "  {:>14}", room);
    fmt::print(out, "\n");
  };
  row("stage", "in flight", "persistent", "activations", "peak",
      gpu ? fmt::format("room on {}", gpu->name.empty() ? bytes_text(gpu->bytes) : gpu->name) : "");
  for (const RankMemory& m : stages) {
    if (!m.has_activations()) {
      row(m.stage, "-", bytes_text(m.persistent_bytes), "-", "-", "");
      continue;
    }
    row(m.stage, fmt::format("{}", m.activations.microbatches_in_flight),
        bytes_text(m.persistent_bytes), bytes_text(m.activation_bytes), bytes_text(m.peak_bytes),
        gpu ? room_text(gpu->bytes - headroom - m.peak_bytes) : "");
  }
  if (!estimated) {
    if (gpu) fmt::print(out, "  no verdict on the GPU: the peak needs the activations\n");
    return;
  }
  const RankMemory& top = stages[static_cast<std::size_t>(heaviest_peak_stage(stages))];
  fmt::print(out, "  heaviest rank by peak: stage {}, {} (persistent {}, activations {})",
             top.stage, bytes_text(top.peak_bytes), bytes_text(top.persistent_bytes),
             bytes_text(top.activation_bytes));
  if (gpu) {
    const std::int64_t room = gpu->bytes - headroom - top.peak_bytes;
    fmt::print(out, "\n  {} on {} ({}) with {} headroom: {} {}",
               room >= 0 ? "fits" : "does not fit", gpu->name.empty() ? "the GPU" : gpu->name,
               bytes_text(gpu->bytes), bytes_text(headroom), bytes_text(room >= 0 ? room : -room),
               room >= 0 ? "to spare" : "short");
  }
  fmt::print(out,
             "\n  not modelled, left to the headroom: NCCL's buffers, the CUDA context, cuBLAS and "
             "Transformer Engine\n    workspaces, allocator fragmentation, the step's transient "
             "buffers (docs/memory.md)\n");
}

}  // namespace paramlayout::cli
