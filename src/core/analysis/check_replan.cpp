// check --replan: a layout against a fresh plan of its manifest with its recorded options.
#include <fmt/format.h>

#include <unordered_map>

#include "paramlayout/check.hpp"
#include "paramlayout/plan.hpp"

namespace paramlayout {

std::vector<Violation> compare_with_replan(const Layout& layout, const Manifest& manifest) {
  std::vector<Violation> out;
  Result<Layout> fresh = plan(manifest, layout.options);
  if (!fresh) {
    out.push_back({"", "the manifest cannot be planned again: " + fresh.error().message});
    return out;
  }
  auto find_buffer = [](const Layout& l, const BufferKey& key) -> const BufferLayout* {
    for (const BufferLayout& b : l.buffers) {
      if (b.key == key) return &b;
    }
    return nullptr;
  };
  for (std::size_t i = 0; i < layout.buffers.size(); ++i) {
    const BufferLayout& b = layout.buffers[i];
    const std::string where = fmt::format("buffer {} ({})", i, describe(b.key));
    const BufferLayout* want = find_buffer(*fresh, b.key);
    if (want == nullptr) {
      out.push_back({where, "a fresh plan has no buffer with this key"});
      continue;
    }
    if (b.numel != want->numel || b.numel_unpadded != want->numel_unpadded) {
      out.push_back(
          {where, fmt::format("numel {} (unpadded {}), a fresh plan gives {} ({})", b.numel,
                              b.numel_unpadded, want->numel, want->numel_unpadded)});
    }
    for (std::size_t j = 0; j < std::max(b.buckets.size(), want->buckets.size()); ++j) {
      const BucketRange* have = j < b.buckets.size() ? &b.buckets[j] : nullptr;
      const BucketRange* fresh_bucket = j < want->buckets.size() ? &want->buckets[j] : nullptr;
      auto text = [](const BucketRange* r) {
        return r ? fmt::format("[{}, {}) unpadded {}", r->start, r->end, r->numel_unpadded)
                 : std::string("absent");
      };
      if (!have || !fresh_bucket || !(*have == *fresh_bucket)) {
        out.push_back(
            {fmt::format("{}, bucket {}", where, j),
             fmt::format("is {}, a fresh plan gives {}", text(have), text(fresh_bucket))});
      }
    }
    if (!(b.param_buffer == want->param_buffer)) {
      out.push_back({where, "its param_buffer differs from a fresh plan's"});
    }
    std::unordered_map<std::string_view, const ParamSlot*> fresh_slots;
    for (const ParamSlot& p : want->params) fresh_slots.emplace(p.name, &p);
    for (const ParamSlot& p : b.params) {
      auto it = fresh_slots.find(p.name);
      if (it == fresh_slots.end()) {
        out.push_back({fmt::format("{}, param \"{}\"", where, excerpt(p.name)),
                       "a fresh plan puts it in another buffer or nowhere"});
      } else if (!(p == *it->second)) {
        const ParamSlot& f = *it->second;
        out.push_back(
            {fmt::format("{}, param \"{}\"", where, excerpt(p.name)),
             fmt::format("is at [{}, {}) in bucket {} (index {}), a fresh plan puts it "
                         "at [{}, {}) in bucket {} (index {})",
                         p.start, p.end, p.bucket, p.index, f.start, f.end, f.bucket, f.index)});
      }
    }
  }
  for (const BufferLayout& want : fresh->buffers) {
    if (find_buffer(layout, want.key) == nullptr) {
      out.push_back(
          {"", fmt::format("a fresh plan has a {} buffer the layout lacks", describe(want.key))});
    }
  }
  return out;
}

}  // namespace paramlayout
