// Megatron-LM's pipeline split, restated. Without a layout string a chunk builds the decoder
// layers [offset, offset + count), both computed from the stage sizes (even, uneven first and
// last stages, or with the embedding and loss counted as layers); with one, the layers it
// lists. The multi-token prediction layers go to the last chunk, or where the layout puts 'm'.
#include "paramlayout/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace paramlayout {
namespace {

/// Longest unrolled layout accepted: far more layers than any model has.
constexpr std::int64_t kMaxLayoutLength = std::int64_t{1} << 20;

/// A run of decoder layers and of multi-token prediction layers.
struct Span {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

std::vector<std::int64_t> range(Span s) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < s.count; ++i) out.push_back(s.offset + i);
  return out;
}

/// Reads the decimal count after '*' at `text[pos]`; nullopt when there is none.
std::optional<std::int64_t> repeat_count(const std::string& text, std::size_t& pos) {
  if (pos >= text.size() || text[pos] != '*') return std::nullopt;
  std::size_t end = pos + 1;
  std::int64_t n = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9' && n <= kMaxLayoutLength) {
    n = n * 10 + (text[end++] - '0');
  }
  if (end == pos + 1) return std::nullopt;
  pos = end;
  return n;
}

Result<std::string> repeat(std::string_view unit, std::int64_t n, std::string& out) {
  const auto grown =
      static_cast<std::int64_t>(out.size() + unit.size() * static_cast<std::size_t>(n));
  if (grown > kMaxLayoutLength) {
    return Error{fmt::format("--pipeline-model-parallel-layout unrolls to more than {} layers",
                             kMaxLayoutLength)};
  }
  for (std::int64_t i = 0; i < n; ++i) out.append(unit);
  return out;
}

/// "(xy)*n" -> xy repeated n times (one level, no nesting), then "x*n" -> x repeated.
Result<std::string> unroll(const std::string& text) {
  std::string groups;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t close = text[i] == '(' ? text.find(')', i + 1) : std::string::npos;
    std::size_t after = close + 1;
    std::optional<std::int64_t> n;
    if (close != std::string::npos && close > i + 1) n = repeat_count(text, after);
    if (!n) {
      groups += text[i++];
      continue;
    }
    if (Result<std::string> r =
            repeat(std::string_view(text).substr(i + 1, close - i - 1), *n, groups);
        !r) {
      return r.error();
    }
    i = after;
  }
  std::string out;
  for (std::size_t i = 0; i < groups.size();) {
    std::size_t after = i + 1;
    std::optional<std::int64_t> n = repeat_count(groups, after);
    if (!n) {
      out += groups[i++];
      continue;
    }
    if (Result<std::string> r = repeat(std::string_view(groups).substr(i, 1), *n, out); !r) {
      return r.error();
    }
    i = after;
  }
  return out;
}

std::int64_t count(const std::string& stage, char c) {
  return std::count(stage.begin(), stage.end(), c);
}

/// The checks Megatron-LM's TransformerConfig and validate_layer_layout make on a layout.
std::optional<std::string> layout_problem(const std::vector<std::string>& stages,
                                          const PipelineConfig& c) {
  std::string flat;
  for (const std::string& s : stages) flat += s;
  if (flat.empty() || flat.front() != 'E') return "the layout must start with the embedding 'E'";
  if (flat.back() != 'L') return "the layout must end with the loss 'L'";
  if (count(flat, 'E') != 1) return "the layout must hold the embedding 'E' exactly once";
  if (count(flat, 'L') != 1) return "the layout must hold the loss 'L' exactly once";
  if (count(flat, 't') != c.num_layers) {
    return fmt::format("the layout holds {} decoder layers 't', but --num-layers is {}",
                       count(flat, 't'), c.num_layers);
  }
  if (count(flat, 'm') != c.mtp_num_layers) {
    return fmt::format(
        "the layout holds {} multi-token prediction layers 'm', but "
        "--mtp-num-layers is {}",
        count(flat, 'm'), c.mtp_num_layers);
  }
  const std::size_t first_mtp = flat.find('m');
  if (first_mtp != std::string::npos && flat.find('t', first_mtp) != std::string::npos) {
    return std::string("decoder layers 't' must come before multi-token prediction layers 'm'");
  }
  std::optional<std::size_t> mtp_stage;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (count(stages[s], 'm') == 0) continue;
    if (static_cast<std::int64_t>(s) / c.pp != c.vpp - 1) {
      return fmt::format(
          "multi-token prediction layers must be in a pipeline stage's last "
          "virtual chunk, not in stage {}'s chunk {} (layout stage {})",
          static_cast<std::int64_t>(s) % c.pp, static_cast<std::int64_t>(s) / c.pp, s);
    }
    if (mtp_stage) return std::string("all multi-token prediction layers must be in one stage");
    mtp_stage = s;
  }
  return std::nullopt;
}

/// The split arguments' own consistency (Megatron-LM's TransformerConfig checks).
std::optional<std::string> split_problem(const PipelineConfig& c) {
  const bool uneven = c.first_stage_layers || c.last_stage_layers;
  const std::int64_t f = c.first_stage_layers.value_or(0);
  const std::int64_t l = c.last_stage_layers.value_or(0);
  if (uneven && (c.account_for_embedding || c.account_for_loss)) {
    return std::string(
        "--decoder-first/last-pipeline-num-layers cannot be combined with "
        "--account-for-embedding/loss-in-pipeline-split");
  }
  if (uneven) {
    if (c.first_stage_layers && f <= 0) {
      return std::string("--decoder-first-pipeline-num-layers must be >= 1");
    }
    if (c.last_stage_layers && l <= 0) {
      return std::string("--decoder-last-pipeline-num-layers must be >= 1");
    }
    if (c.vpp > 1 && (f % c.vpp != 0 || l % c.vpp != 0)) {
      return fmt::format(
          "the first and last stages' layers ({} and {}) must be divisible by "
          "the {} virtual chunks",
          f, l, c.vpp);
    }
    const std::int64_t rest = c.num_layers - f - l;
    const std::int64_t middle =
        c.pp - (c.first_stage_layers ? 1 : 0) - (c.last_stage_layers ? 1 : 0);
    if (middle < 0) {
      // One stage that is both first and last builds the last stage's count, as in
      // Megatron-LM.
      if (l == c.num_layers) return std::nullopt;
      return fmt::format(
          "a single pipeline stage builds --decoder-last-pipeline-num-layers "
          "layers, {}, but the model has {}",
          l, c.num_layers);
    }
    const bool both = c.first_stage_layers && c.last_stage_layers;
    const std::string ends = both                   ? "the first and last stages hold"
                             : c.first_stage_layers ? "the first stage holds"
                                                    : "the last stage holds";
    if (rest < 0) {
      return fmt::format("{} {} layers, more than the model's {}", ends, f + l, c.num_layers);
    }
    if (rest > 0 && middle == 0) {
      return fmt::format("{} {} of the {} layers, and no stage is left for the remaining {}", ends,
                         f + l, c.num_layers, rest);
    }
    if (rest == 0 && middle > 0) {
      return fmt::format("{} all {} layers, leaving none for the other {} stages", ends,
                         c.num_layers, middle);
    }
    if (middle == 0 && c.vpp > 1) {
      // Megatron-LM's layer offsets divide by the number of middle stages.
      return std::string(
          "uneven first and last stages with virtual pipeline chunks need a "
          "middle stage (at least 3 pipeline stages)");
    }
    if (middle > 0 && rest % middle != 0) {
      return fmt::format("the {} middle layers are not divisible by the {} middle stages", rest,
                         middle);
    }
    if (middle > 0 && c.vpp > 1 && (rest / middle) % c.vpp != 0) {
      return fmt::format(
          "the {} layers of each middle stage are not divisible by the {} "
          "virtual chunks",
          rest / middle, c.vpp);
    }
    return std::nullopt;
  }
  const std::int64_t counted = c.num_layers + c.account_for_embedding + c.account_for_loss;
  const std::string what = counted == c.num_layers
                               ? fmt::format("the {} layers", counted)
                               : fmt::format(
                                     "the {} layers (with the embedding or loss "
                                     "counted as layers)",
                                     counted);
  if (counted % c.pp != 0) {
    return fmt::format("{} are not divisible by the {} pipeline stages", what, c.pp);
  }
  if (c.vpp > 1 && (counted / c.pp) % c.vpp != 0) {
    return fmt::format(
        "the {} layers of each pipeline stage are not divisible by the {} "
        "virtual chunks",
        counted / c.pp, c.vpp);
  }
  return std::nullopt;
}

/// get_num_layers_to_build and get_transformer_layer_offset without a layout.
Span decoder_span(const PipelineConfig& c, std::int64_t rank, std::int64_t v) {
  const std::int64_t P = c.pp;
  const std::int64_t V = c.vpp;
  const bool first_chunk = rank == 0 && v == 0;
  const bool last_chunk = rank == P - 1 && v == V - 1;
  Span s;
  if (c.first_stage_layers || c.last_stage_layers) {
    const std::int64_t f = c.first_stage_layers.value_or(0);
    const std::int64_t l = c.last_stage_layers.value_or(0);
    const std::int64_t mid = c.num_layers - f - l;
    const std::int64_t ms = P - (c.first_stage_layers ? 1 : 0) - (c.last_stage_layers ? 1 : 0);
    std::int64_t per_rank = ms > 0 ? mid / ms : 0;
    if (rank == 0 && c.first_stage_layers) per_rank = f;
    if (rank == P - 1 && c.last_stage_layers) per_rank = l;
    s.count = per_rank / V;
    const std::int64_t mr = c.first_stage_layers ? rank - 1 : rank;
    const std::int64_t per_chunk_mid = ms > 0 ? mid / V / ms : 0;
    const std::int64_t total = f / V + mid / V + l / V;
    s.offset = rank == 0 ? v * total : v * total + f / V + mr * per_chunk_mid;
    return s;
  }
  const std::int64_t counted = c.num_layers + c.account_for_embedding + c.account_for_loss;
  const std::int64_t per_rank = counted / P;
  s.count = per_rank / V;
  s.offset = v * (counted / V) + rank * (per_rank / V);
  if (c.account_for_embedding) {
    if (first_chunk)
      s.count -= 1;
    else
      s.offset -= 1;
  }
  if (c.account_for_loss && last_chunk) s.count -= 1;
  return s;
}

/// The chunks of a list of stages (layout string or hybrid pattern), in stage-index order
/// vp * pp + rank.
struct StageCounts {
  std::vector<Span> decoder;
  std::vector<Span> mtp;
};

StageCounts spans_of(const std::vector<std::int64_t>& decoder,
                     const std::vector<std::int64_t>& mtp) {
  StageCounts out;
  std::int64_t t = 0;
  std::int64_t m = 0;
  for (std::size_t s = 0; s < decoder.size(); ++s) {
    out.decoder.push_back({t, decoder[s]});
    out.mtp.push_back({m, mtp[s]});
    t += decoder[s];
    m += mtp[s];
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> parse_pipeline_layout(const std::string& layout) {
  std::string text;
  for (char c : layout) {
    if (c != ',') text += c;
  }
  Result<std::string> unrolled = unroll(text);
  if (!unrolled) return unrolled.error();
  std::vector<std::string> stages(1);
  for (char c : *unrolled) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 'L' || c == 't' || c == 'm') {
      stages.back() += c;
    } else {
      return Error{
          fmt::format("--pipeline-model-parallel-layout: '{}' is not a layer (E: "
                      "embedding, t: decoder layer, m: multi-token prediction layer, "
                      "L: loss; '|' separates stages, '(...)*N' and 'x*N' repeat)",
                      c)};
    }
  }
  return stages;
}

std::string format_pipeline_layout(const std::vector<std::string>& stages) {
  const auto runs = [](const std::string& stage) {
    std::string out;
    for (std::size_t i = 0; i < stage.size();) {
      std::size_t end = i;
      while (end < stage.size() && stage[end] == stage[i]) ++end;
      out += stage[i];
      if (end - i > 1) out += fmt::format("*{}", end - i);
      i = end;
    }
    return out;
  };
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t end = i;
    while (end < stages.size() && stages[end] == stages[i]) ++end;
    const bool last = end == stages.size();
    // A run that reaches the end keeps its last stage apart: it takes no '|' after it.
    const std::size_t repeated = end - i - (last ? 1 : 0);
    if (repeated > 1) {
      out += fmt::format("({}|)*{},", runs(stages[i]), repeated);
    } else if (repeated == 1) {
      out += runs(stages[i]) + "|";
    }
    if (last) out += runs(stages[end - 1]);
    i = end;
  }
  return out;
}

Result<std::vector<ChunkPlacement>> place_layers(const PipelineConfig& c) {
  const auto fail = [](const std::string& what) { return Error{what}; };
  PipelineConfig config = c;
  StageCounts table;
  const bool listed = !c.layout.empty() || !c.hybrid_stage_layers.empty();
  if (!c.layout.empty()) {
    Result<std::vector<std::string>> stages = parse_pipeline_layout(c.layout);
    if (!stages) return stages.error();
    if (stages->size() % static_cast<std::size_t>(c.pp) != 0) {
      return fail(
          fmt::format("--pipeline-model-parallel-layout has {} stages, not a multiple "
                      "of the {} pipeline stages",
                      stages->size(), c.pp));
    }
    config.vpp = static_cast<std::int64_t>(stages->size()) / c.pp;
    if (std::optional<std::string> p = layout_problem(*stages, config)) {
      return fail("--pipeline-model-parallel-layout: " + *p);
    }
    std::vector<std::int64_t> decoder;
    std::vector<std::int64_t> mtp;
    for (const std::string& s : *stages) {
      decoder.push_back(count(s, 't'));
      mtp.push_back(count(s, 'm'));
    }
    table = spans_of(decoder, mtp);
  } else if (!c.hybrid_stage_layers.empty()) {
    if (c.hybrid_stage_layers.size() % static_cast<std::size_t>(c.pp) != 0) {
      return fail(
          fmt::format("the hybrid layer pattern has {} '|'-separated stages, not a "
                      "multiple of the {} pipeline stages",
                      c.hybrid_stage_layers.size(), c.pp));
    }
    config.vpp = static_cast<std::int64_t>(c.hybrid_stage_layers.size()) / c.pp;
    std::vector<std::int64_t> mtp(c.hybrid_stage_layers.size(), 0);
    mtp.back() = c.mtp_num_layers;
    table = spans_of(c.hybrid_stage_layers, mtp);
  } else if (std::optional<std::string> p = split_problem(c)) {
    return fail(*p);
  }
  if (config.vpp > 1 && config.pp == 1) {
    return fail("virtual pipeline chunks need more than one pipeline stage");
  }

  std::vector<ChunkPlacement> chunks;
  for (std::int64_t rank = 0; rank < config.pp; ++rank) {
    for (std::int64_t v = 0; v < config.vpp; ++v) {
      ChunkPlacement& p = chunks.emplace_back();
      p.stage = rank;
      p.chunk = v;
      p.pre_process = rank == 0 && v == 0;
      p.post_process = rank == config.pp - 1 && v == config.vpp - 1;
      p.pipeline_parallel = config.pp > 1;
      const auto index = static_cast<std::size_t>(v * config.pp + rank);
      const Span decoder = listed ? table.decoder[index] : decoder_span(config, rank, v);
      if (decoder.count < 0) {
        return fail(
            fmt::format("stage {} chunk {}: not enough layers once the embedding and "
                        "loss are counted as layers",
                        rank, v));
      }
      p.layers = range(decoder);
      p.layer_offset = decoder.offset;
      const Span mtp =
          listed ? table.mtp[index] : Span{0, p.post_process ? config.mtp_num_layers : 0};
      p.mtp_layers = range(mtp);
      const bool holds_last_layer =
          decoder.count > 0 && decoder.offset + decoder.count == config.num_layers;
      const bool with_mtp = config.mtp_num_layers > 0 || config.mtp_given;
      p.final_norm = with_mtp && c.hybrid_stage_layers.empty() ? holds_last_layer : p.post_process;
    }
  }
  return chunks;
}

}  // namespace paramlayout
