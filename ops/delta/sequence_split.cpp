#include "ops/delta/sequence_split.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace lina::detail::delta {
namespace {

using i64 = std::int64_t;

i64 round_up64(i64 x) { return (x + 63) / 64 * 64; }

i64 longest(const Problem& p) {
  i64 m = 0;
  for (const Sequence& s : p.sequences) m = std::max(m, s.length);
  return m;
}

// State-kernel CTAs one (sequence, value head) pair costs the split per chunk step: the maps' (K + V) / 64 column
// tiles and the outputs' V / 64 (the unsplit op: V / 64).
i64 split_tiles_per_pair(const Problem& p) { return (p.K + 2 * p.V + 63) / 64; }

void* host_alloc(std::size_t bytes, void*, const char*) { return bytes ? ::operator new(bytes) : nullptr; }
void host_release(void* ptr, void*, const char*) { ::operator delete(ptr); }
void host_zero_columns(void* dst, i64 width, i64 col0, i64 rows, i64 cols, std::size_t elem, void*) {
  auto* d = static_cast<unsigned char*>(dst);
  for (i64 r = 0; r < rows; ++r) std::memset(d + static_cast<std::size_t>(r * width + col0) * elem, 0, static_cast<std::size_t>(cols) * elem);
}
void host_copy_columns(void* dst, i64 width, i64 col0, const void* src, i64 rows, i64 cols, std::size_t elem, void*) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (i64 r = 0; r < rows; ++r)
    std::memcpy(d + static_cast<std::size_t>(r * width + col0) * elem, s + static_cast<std::size_t>(r * cols) * elem,
                static_cast<std::size_t>(cols) * elem);
}
void host_identity(float* states, i64 count, i64 K, i64 width, void*) {
  std::fill(states, states + count * K * width, 0.f);
  for (i64 c = 0; c < count; ++c)
    for (i64 i = 0; i < K; ++i) states[(c * K + i) * width + i] = 1.f;
}
// E_{s+1} = X_s E_s + Y_s in fp32, the CUDA kernel's arithmetic (a sum over l in increasing order)
void host_combine(const CombineArgs& c, void*) {
  std::vector<float> E(static_cast<std::size_t>(c.K * c.V)), En(E.size());
  for (i64 n = 0; n < c.N; ++n)
    for (i64 h = 0; h < c.HV; ++h) {
      const i64 so = (n * c.HV + h) * c.K * c.V;
      for (i64 i = 0; i < c.K * c.V; ++i) E[static_cast<std::size_t>(i)] = c.h0 ? c.h0[so + i] : 0.f;
      for (i64 s = c.first[n]; s < c.first[n + 1]; ++s) {
        const i64 blk = (s * c.HV + h) * c.K;
        std::copy(E.begin(), E.end(), c.entering + blk * c.V);
        for (i64 i = 0; i < c.K; ++i)
          for (i64 j = 0; j < c.V; ++j) {
            float acc = c.Y[(blk + i) * c.y_pitch + j];
            for (i64 l = 0; l < c.K; ++l) acc += c.X[(blk + i) * c.x_pitch + l] * E[static_cast<std::size_t>(l * c.V + j)];
            En[static_cast<std::size_t>(i * c.V + j)] = acc;
          }
        E.swap(En);
      }
      if (c.ht) std::copy(E.begin(), E.end(), c.ht + so);
    }
}

}  // namespace

SplitPlan plan_split(const Problem& p, i64 segment_len) {
  SplitPlan plan;
  plan.segment_len = segment_len;
  plan.first.reserve(static_cast<std::size_t>(p.N) + 1);
  for (const Sequence& s : p.sequences) {
    plan.first.push_back(static_cast<i64>(plan.segments.size()));
    for (i64 off = 0; off < s.length; off += segment_len)
      plan.segments.push_back({s.row_begin + off, std::min(segment_len, s.length - off)});
  }
  plan.first.push_back(static_cast<i64>(plan.segments.size()));
  return plan;
}

Decline split_declines(const Problem& p, int sms) {
  if (sms <= 0) return std::string("no CUDA device to plan for");
  const i64 pairs = p.N * p.HV, L = longest(p);
  if (pairs == 0 || L < 2 * kSplitMinSegment)
    return "the longest sequence has " + std::to_string(L) + " tokens (the sequence split needs at least " +
           std::to_string(2 * kSplitMinSegment) + ")";
  // Each pair's chain steps cost the split (K + 2V) / 64 CTAs against V / 64 unsplit: it pays while those fill at
  // most half the GPU (docs/kernels/chunk_delta_fwd.md, "Sequence split")
  if (2 * pairs * split_tiles_per_pair(p) > sms)
    return std::to_string(p.N) + " x " + std::to_string(p.HV) + " (sequence, value head) pairs at K = " + std::to_string(p.K) +
           ", V = " + std::to_string(p.V) + " (the sequence split pays below " + std::to_string(sms / (2 * split_tiles_per_pair(p))) +
           " pairs on " + std::to_string(sms) + " SMs)";
  return std::nullopt;
}

i64 split_segment_length(const Problem& p, int sms) {
  // about one wave of output CTAs (V / 64 per segment and head) over all the rows
  const i64 per_segment = p.HV * std::max<i64>(1, p.V / 64);
  const i64 budget = std::max<i64>(1, sms / per_segment);
  const i64 rows = p.B * p.T;
  return std::max(kSplitMinSegment, round_up64((rows + budget - 1) / budget));
}

const SplitOps& cpu_split_ops() {
  static const SplitOps ops{host_alloc, host_release, host_zero_columns, host_copy_columns, host_identity, host_combine};
  return ops;
}

}  // namespace lina::detail::delta
