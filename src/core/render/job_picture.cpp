// render_job_svg: a whole job in one picture, a row per pipeline stage.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "buffer_view.hpp"
#include "page.hpp"
#include "palette.hpp"
#include "paramlayout/check.hpp"
#include "paramlayout/render.hpp"
#include "paramlayout/text.hpp"
#include "svg.hpp"

namespace paramlayout {
namespace {

using render::Colour;
using render::escape;
using render::kMargin;
using render::kPlotLeft;
using render::kPlotWidth;
using render::Palette;

constexpr double kFirstRow = 80;
constexpr double kStripTop = 14;  ///< below the row's top: the chunks' labels above it
constexpr double kStrip = 18;     ///< the buffers' height
constexpr double kBarTop = kStripTop + kStrip + 4;
constexpr double kBar = 12;  ///< the memory bar's height
constexpr double kRowHeight = kBarTop + kBar + 20;
constexpr double kBufferGap = 2;
constexpr double kChunkGap = 8;
constexpr double kCharWidth = 5.6;  ///< about, of the small text
constexpr double kMaxBoxes = 6000;  ///< boxes of params in the picture, about, at most

/// Params drawn as one box: consecutive params of one layer (or one group outside the
/// layers), or narrow ones merged until the box is wide enough.
struct Box {
  double x0 = 0;
  double x1 = 0;
  std::int64_t start = 0;  ///< elements of the buffer
  std::int64_t end = 0;
  std::int64_t params = 0;
  std::int64_t elements = 0;
  Colour colour = 0;
  std::optional<std::int64_t> layer;
  bool mixed = false;  ///< holds params of several layers or groups
  std::string_view first_param;
  std::vector<double> width_by_colour;

  Colour main_colour() const {
    return static_cast<Colour>(std::max_element(width_by_colour.begin(), width_by_colour.end()) -
                               width_by_colour.begin());
  }
};

/// One colour per decoder layer of the job, or per range of them, numbered across chunks.
Palette job_palette(const JobRecord& record) {
  std::int64_t first = -1;
  std::int64_t last = -1;
  for (const JobRecordChunk& c : record.chunks) {
    for (std::int64_t layer : c.layers) {
      first = first < 0 ? layer : std::min(first, layer);
      last = std::max(last, layer);
    }
  }
  return Palette(first, last);
}

std::string plural(std::int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", group_digits(n), n == 1 ? one : many);
}

class JobPicture {
 public:
  JobPicture(const JobRecord& record, const JobStats& stats,
             const std::vector<const Layout*>& layouts)
      : record_(record), stats_(stats), layouts_(layouts), palette_(job_palette(record)) {
    used_.assign(palette_.all().size(), false);
    // One scale of elements for every row: the stage with the most fills the plot.
    element_scale_ = -1;
    std::int64_t heaviest = 0;
    for (const JobStageStats& stage : stats.stages) {
      double elements = 0;
      double gaps = 0;
      bool first_chunk = true;
      for (std::size_t i = 0; i < record.chunks.size(); ++i) {
        if (record.chunks[i].stage != stage.stage) continue;
        const std::size_t buffers = layouts[i]->buffers.size();
        gaps += (first_chunk ? 0 : kChunkGap) +
                (buffers > 1 ? static_cast<double>(buffers - 1) * kBufferGap : 0);
        first_chunk = false;
        for (const BufferLayout& b : layouts[i]->buffers) elements += static_cast<double>(b.numel);
      }
      if (elements > 0) {
        const double scale = std::max(kPlotWidth - gaps, kPlotWidth / 4) / elements;
        element_scale_ = element_scale_ < 0 ? scale : std::min(element_scale_, scale);
      }
      heaviest = std::max(heaviest, stage.bytes_per_rank.total());
    }
    element_scale_ = std::max(element_scale_, 0.0);
    byte_scale_ = heaviest > 0 ? kPlotWidth / static_cast<double>(heaviest) : 0;
    min_box_ = std::max(1.0, static_cast<double>(stats.stages.size()) * kPlotWidth / kMaxBoxes);
  }

  std::string draw() {
    std::string body;
    double y = kFirstRow;
    for (const JobStageStats& stage : stats_.stages) {
      draw_stage(body, y, stage);
      y += kRowHeight;
    }
    y = render::draw_legend(body, y + 4, palette_, used_);
    y = draw_memory_legend(body, y);
    std::string svg = render::page_start(y + 8, palette_);
    svg += header();
    svg += body;
    svg += "</svg>\n";
    return svg;
  }

 private:
  std::string header() const {
    const JobRecord& r = record_;
    const ParallelConfig& p = r.parallel;
    const bool experts = r.parallel.ep > 1 || r.expert_dp != r.dp;
    std::string title =
        fmt::format("{}: {} GPUs = tp {} x pp {} x cp {} x dp {}", escape(excerpt(r.model, 80)),
                    group_digits(r.world_size), p.tp, p.pp, p.cp, r.dp);
    if (experts) {
      title += fmt::format("; experts: ep {} x etp {} x expert dp {}", p.ep, p.etp, r.expert_dp);
    }
    if (p.vpp > 1) title += fmt::format("; {} virtual chunks per stage", p.vpp);
    const std::string sharding =
        r.strategy == Strategy::unpadded
            ? std::string("buffers and optimizer state not sharded")
            : fmt::format("optimizer state sharded over {} ranks{}", r.dense_shards,
                          experts ? fmt::format(" (expert buffers' state over {})", r.expert_shards)
                                  : std::string());
    return fmt::format(
        "<text x=\"{0}\" y=\"28\" class=\"t\">{1}</text>\n"
        "<text x=\"{0}\" y=\"46\" class=\"s\">{2}, {3} params, {4} grads; {5}; padding {6:.2f}% "
        "of the buffers</text>\n"
        "<text x=\"{0}\" y=\"60\" class=\"s\">A row per pipeline stage. Above: each chunk's "
        "buffers whole, as every rank of the stage keeps its params and grads, at one scale for "
        "the job. Below: memory per rank, at the heaviest stage's scale. Hover for figures."
        "</text>\n",
        kMargin, title, to_string(r.strategy), to_string(r.param_dtype), to_string(r.grad_dtype),
        sharding, stats_.padding_percent());
  }

  void draw_stage(std::string& out, double top, const JobStageStats& stage) {
    const BytesPerRank& bytes = stage.bytes_per_rank;
    out += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" class=\"h\">stage {}</text>\n"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"s\">{}</text>\n",
        kMargin, top + kStripTop + 13, stage.stage, kMargin, top + kBarTop + 10,
        human_bytes(static_cast<double>(bytes.total())));
    // The chunks' buffers, end to end.
    std::vector<std::size_t> chunks;
    for (std::size_t i = 0; i < record_.chunks.size(); ++i) {
      if (record_.chunks[i].stage == stage.stage) chunks.push_back(i);
    }
    double x = kPlotLeft;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const std::size_t i = chunks[k];
      const double start = x;
      const Layout& layout = *layouts_[i];
      for (std::size_t b = 0; b < layout.buffers.size(); ++b) {
        if (b > 0) x += kBufferGap;
        x = draw_buffer(out, x, top + kStripTop, i, b);
      }
      const double next = k + 1 < chunks.size() ? x + kChunkGap : kPlotLeft + kPlotWidth;
      draw_chunk_label(out, start, next, top, i);
      x += kChunkGap;
    }
    draw_memory(out, top + kBarTop, stage);
  }

  /// "chunk 1: 31-32 mtp 0" above the chunk's buffers, shortened or left out where the
  /// chunk is too narrow for it.
  void draw_chunk_label(std::string& out, double x0, double x1, double top, std::size_t i) const {
    const JobRecordChunk& c = record_.chunks[i];
    const double room = (x1 - x0) / kCharWidth;
    for (const std::string& label :
         {fmt::format("chunk {}: {}", c.chunk, describe_chunk(c)), describe_chunk(c)}) {
      if (static_cast<double>(label.size()) <= room) {
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\">{}</text>\n", x0,
                           top + kStripTop - 3, escape(label));
        return;
      }
    }
  }

  /// Buffer `b` of chunk `i` from `x`: its elements at the job's scale. Returns its right end.
  double draw_buffer(std::string& out, double x, double top, std::size_t i, std::size_t b) {
    const JobRecordChunk& c = record_.chunks[i];
    const BufferLayout& buffer = layouts_[i]->buffers[b];
    const double width = static_cast<double>(buffer.numel) * element_scale_;
    const std::int64_t params = buffer.param_numel().value_or(0);
    out += fmt::format(
        "<rect class=\"pad\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\">"
        "<title>{} buffer {}: {} ({}), {} in {}, {}, padding {:.2f}%; {}</title></rect>\n",
        x, top, std::max(width, 0.5), kStrip, c.name(), b, escape(describe(buffer.key)),
        to_string(buffer.strategy),
        plural(static_cast<std::int64_t>(buffer.params.size()), "param", "params"),
        plural(static_cast<std::int64_t>(buffer.buckets.size()), "bucket", "buckets"),
        plural(buffer.numel, "element", "elements"),
        padding_share_percent(buffer.numel - params, params),
        buffer.num_shards
            ? fmt::format("each rank keeps the optimizer state of 1/{} of it", *buffer.num_shards)
            : std::string("every rank keeps all of its optimizer state"));
    draw_params(out, x, top, c, buffer);
    // Bucket boundaries, where they are far enough apart to be seen.
    std::string lines;
    double last = x;
    for (std::size_t j = 1; j < buffer.buckets.size(); ++j) {
      const double at = x + static_cast<double>(buffer.buckets[j].start) * element_scale_;
      if (at - last < 3) continue;
      lines += fmt::format("M{:.1f} {:.1f}v{}", at, top - 2, kStrip + 4);
      last = at;
    }
    if (!lines.empty()) out += fmt::format("<path class=\"grid\" d=\"{}\"/>\n", lines);
    return x + width;
  }

  /// The params of `buffer` of `chunk`, their decoder layers numbered as the job numbers
  /// them (a chunk's param names number its own layers from 0).
  void draw_params(std::string& out, double x, double top, const JobRecordChunk& chunk,
                   const BufferLayout& buffer) {
    std::vector<std::size_t> order(buffer.params.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return buffer.params[a].start < buffer.params[b].start;
    });
    Box box;
    const auto flush = [&] {
      if (box.params == 0) return;
      const Colour colour = box.mixed ? box.main_colour() : box.colour;
      std::string what;
      if (box.params == 1) {
        what = escape(excerpt(box.first_param, 120));
      } else if (!box.mixed) {
        what = fmt::format(
            "{}: {}, {}",
            box.layer ? fmt::format("layer {}", *box.layer) : palette_.label(box.colour),
            plural(box.params, "param", "params"), plural(box.elements, "element", "elements"));
      } else {
        what = fmt::format("{}, {}, mostly {}", plural(box.params, "param", "params"),
                           plural(box.elements, "element", "elements"), palette_.label(colour));
      }
      out += fmt::format(
          "<rect class=\"p {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\">"
          "<title>{} [{}, {})</title></rect>\n",
          Palette::css_class(colour), box.x0, top, std::max(box.x1 - box.x0, 0.3), kStrip, what,
          box.start, box.end);
      used_[static_cast<std::size_t>(colour)] = true;
      box.params = 0;
    };
    for (std::size_t index : order) {
      const ParamSlot& p = buffer.params[index];
      std::optional<std::int64_t> layer = render::decoder_layer_of(p.name);
      if (layer && *layer < static_cast<std::int64_t>(chunk.layers.size())) {
        layer = chunk.layers[static_cast<std::size_t>(*layer)];
      } else {
        layer.reset();
      }
      const Colour colour = layer ? palette_.colour_of_layer(*layer) : palette_.colour_of(p.name);
      const double x0 = x + static_cast<double>(p.start) * element_scale_;
      const double x1 = x + static_cast<double>(p.end) * element_scale_;
      const bool same = box.params > 0 && !box.mixed && colour == box.colour &&
                        layer == box.layer && x0 - box.x1 < 0.5;
      const bool narrow = box.params > 0 && box.x1 - box.x0 < min_box_;
      if (box.params > 0 && !same && !narrow) flush();
      if (box.params == 0) {
        box = Box{};
        box.x0 = x0;
        box.start = p.start;
        box.colour = colour;
        box.layer = layer;
        box.first_param = p.name;
        box.width_by_colour.assign(palette_.all().size(), 0.0);
      } else if (!same) {
        box.mixed = true;
      }
      box.x1 = x1;
      box.end = p.end;
      box.params += 1;
      box.elements += p.end - p.start;
      box.width_by_colour[static_cast<std::size_t>(colour)] += std::max(x1 - x0, 1e-9);
    }
    flush();
  }

  void draw_memory(std::string& out, double top, const JobStageStats& stage) const {
    const BytesPerRank& b = stage.bytes_per_rank;
    const struct {
      const char* css;
      const char* name;
      std::int64_t bytes;
    } parts[] = {{"mp", "params", b.params},
                 {"mg", "grads", b.grads},
                 {"mo", "optimizer state", b.optimizer}};
    double x = kPlotLeft;
    for (const auto& part : parts) {
      const double width = static_cast<double>(part.bytes) * byte_scale_;
      out += fmt::format(
          "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\">"
          "<title>stage {}: {} {} per rank</title></rect>\n",
          part.css, x, top, width, kBar, stage.stage, part.name,
          human_bytes(static_cast<double>(part.bytes)));
      x += width;
    }
    const LayoutTraffic& t = stage.traffic;
    std::string marks;
    if (stage.stage == stats_.heaviest_stage) marks += "; the heaviest stage";
    if (stage.stage == stats_.busiest_stage && t.sent_bytes > 0) marks += "; the most traffic";
    out += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" class=\"s\">params {}, grads {}, optimizer state {}; "
        "padding {:.2f}%; sends {} per step ({:.2f}% padding){}</text>\n",
        kPlotLeft, top + kBar + 11, human_bytes(static_cast<double>(b.params)),
        human_bytes(static_cast<double>(b.grads)), human_bytes(static_cast<double>(b.optimizer)),
        stage.padding_percent(), human_bytes(static_cast<double>(t.sent_bytes)),
        t.padding_percent(), marks);
  }

  double draw_memory_legend(std::string& out, double y) const {
    out +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"h\">per rank</text>\n", kMargin, y + 11);
    double x = kPlotLeft;
    for (const auto& [css, label] : {std::pair{"mp", "params"}, std::pair{"mg", "grads"},
                                     std::pair{"mo", "optimizer state"}}) {
      out += fmt::format(
          "<rect class=\"sw {}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\"/>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\">{}</text>\n",
          css, x, y, x + 18, y + 11, label);
      x += 36 + 6.2 * static_cast<double>(std::string_view(label).size());
    }
    return y + 24;
  }

  const JobRecord& record_;
  const JobStats& stats_;
  const std::vector<const Layout*>& layouts_;
  Palette palette_;
  std::vector<bool> used_;
  double element_scale_ = 0;  ///< pixels per element
  double byte_scale_ = 0;     ///< pixels per byte
  double min_box_ = 1;        ///< pixels: narrower boxes of params merge
};

}  // namespace

Result<std::string> render_job_svg(const JobRecord& record, const JobStats& stats,
                                   const std::vector<const Layout*>& layouts) {
  if (layouts.size() != record.chunks.size() || stats.chunks.size() != record.chunks.size() ||
      stats.stages.size() != static_cast<std::size_t>(record.parallel.pp)) {
    return Error{fmt::format("{} layouts and {} chunks' figures for a job of {} chunks",
                             layouts.size(), stats.chunks.size(), record.chunks.size())};
  }
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    if (Result<void> valid = validate_structure(*layouts[i]); !valid) {
      return Error{record.chunks[i].name() + ": " + valid.error().message};
    }
  }
  return JobPicture(record, stats, layouts).draw();
}

}  // namespace paramlayout
