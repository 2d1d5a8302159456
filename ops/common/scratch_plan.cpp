#include "ops/common/scratch_plan.h"

#include <algorithm>
#include <numeric>

namespace lina::detail {

ScratchPlan plan_scratch(const std::vector<ScratchSlice>& slices, std::int64_t align) {
  const auto round_up = [align](std::int64_t x) { return (x + align - 1) / align * align; };
  ScratchPlan plan;
  plan.offsets.assign(slices.size(), 0);
  std::vector<std::size_t> order(slices.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return slices[a].bytes > slices[b].bytes; });
  struct Placed {
    std::int64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  for (std::size_t i : order) {
    const ScratchSlice& s = slices[i];
    const std::int64_t size = round_up(s.bytes);
    plan.unshared_bytes += size;
    if (size == 0) continue;
    // Candidate offsets: 0 and the end of every placed slice that lives at the same time; the lowest that fits.
    std::vector<const Placed*> rivals;
    for (const Placed& p : placed)
      if (p.first <= s.last_stage && s.first_stage <= p.last) rivals.push_back(&p);
    std::vector<std::int64_t> candidates{0};
    for (const Placed* p : rivals) candidates.push_back(p->end);
    std::sort(candidates.begin(), candidates.end());
    std::int64_t at = 0;
    for (std::int64_t c : candidates) {
      const bool fits = std::none_of(rivals.begin(), rivals.end(), [&](const Placed* p) { return c < p->end && p->begin < c + size; });
      if (fits) {
        at = c;
        break;
      }
    }
    plan.offsets[i] = at;
    placed.push_back({at, at + size, s.first_stage, s.last_stage});
    plan.total_bytes = std::max(plan.total_bytes, at + size);
  }
  return plan;
}

}  // namespace lina::detail
