// When a KDA chunk's diagonal 16 x 16 blocks may go through their middle row on tensor cores without
// safe_gate: the check on the data that stands in for safe_gate's promise (docs/math.md section 5).
// Shared by the forward's kda_prep and the backward's chunk_prep_v2.
#pragma once

namespace lina::detail::cuda {
namespace {

// The floor on the sum of a 16-row block's gates, per channel, natural log. A block whose 16 gates sum to at
// least -40 keeps every middle-row factor within e^(+-40) (safe_gate's bound, g >= -5 over 8 rows) and the
// forward's moved tile (rows 32-39 against keys 24-31 through row 40, two blocks) within e^80, as under safe_gate.
constexpr float kBlockGateSumFloor = -40.f;

// Whether every 16-row block of a thread's cumsum segment sums to at least `floor`: cum[i] is the running gate sum
// from the segment's first row (the segment starts a block), in the units of `floor`. NaN fails.
template <int R>
__device__ __forceinline__ bool block_sums_at_least(const float (&cum)[R], float floor) {
  static_assert(R % 16 == 0, "a cumsum segment is whole 16-row blocks");
  bool ok = true;
#pragma unroll
  for (int j = 0; j < R / 16; ++j) ok &= cum[16 * j + 15] - (j == 0 ? 0.f : cum[16 * j - 1]) >= floor;
  return ok;
}

}  // namespace
}  // namespace lina::detail::cuda
