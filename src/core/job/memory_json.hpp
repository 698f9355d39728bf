// job.json's "memory": each stage's rank memory, term by term, written and read back.
#pragma once

#include <string>
#include <vector>

#include "../format/json_reader.hpp"
#include "../format/json_writer.hpp"
#include "paramlayout/rank_memory.hpp"

namespace paramlayout {

/// {"activations_for": inputs, "stages": [...]}: one line per stage.
void write_memory_json(json::Writer& w, const std::string& inputs,
                       const std::vector<RankMemory>& stages);

/// For `--json`: every stage's terms as objects with their bytes, exactness, what they are
/// and their source, the totals, and the heaviest stage by peak.
void write_memory_detail_json(json::Writer& w, const std::string& inputs,
                              const std::vector<RankMemory>& stages);

/// The member back; refuses a total that is not its terms' sum.
void read_memory_json(json::Reader& r, json::Element v, const json::Path& path, std::string& inputs,
                      std::vector<RankMemory>& stages);

}  // namespace paramlayout
