// Packing a pipeline's scratch slices into one allocation by their lifetimes: two slices share bytes
// only where no stage of the pipeline uses both (stages are stream-ordered kernels, so a slice whose
// last reader is stage s may be overwritten from stage s + 1 on). Host code; the CUDA pipelines carve
// their one pool allocation by it.
#pragma once
#include <cstdint>
#include <vector>

namespace lina::detail {

struct ScratchSlice {
  std::int64_t bytes = 0;
  int first_stage = 0;  // the stage that writes it first
  int last_stage = 0;   // the last stage that reads it (inclusive)
};

struct ScratchPlan {
  std::vector<std::int64_t> offsets;  // per slice, bytes from the allocation's start, `align`-aligned
  std::int64_t total_bytes = 0;       // the allocation's size
  std::int64_t unshared_bytes = 0;    // what one slice after another would take (for the record)
};

// Greedy first fit, largest slices first: each slice goes to the lowest aligned offset that overlaps no
// placed slice whose stage interval intersects its own. Deterministic (ties keep the input order).
ScratchPlan plan_scratch(const std::vector<ScratchSlice>& slices, std::int64_t align = 256);

}  // namespace lina::detail
