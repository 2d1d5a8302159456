// The delta-rule forward with its sequences cut into segments that run side by side (docs/kernels/chunk_delta_fwd.md,
// "Sequence split"). With few (sequence, value head) pairs the state kernel's grid leaves most SMs idle while each
// CTA walks a long chain of chunks; the recurrence is affine in the state entering a segment,
//   S_out = X S_in + Y     (X: K x K, the segment's transition; Y: K x V, its state from a zero start),
// so the split runs three steps:
//   1. maps: every segment at once, from the state [I | 0] with values [0 | v] (K + V columns; two calls where
//      K + V is wider than a state kernel takes): its final state is [X | Y];
//   2. combine: per (sequence, value head), in segment order, E_0 = h0 (or 0), E_{s+1} = X_s E_s + Y_s in fp32;
//      E_s is segment s's entering state and E after the last one the sequence's final state;
//   3. outputs: every segment at once again, from E_s, writing o.
// Steps 1 and 3 are the unsplit kernels on a varlen view of the same rows (no copy of q, k, g, beta); the work is
// about (K + 2V) / V times the unsplit state work, spread over segments x pairs CTAs instead of pairs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/dtype.h"
#include "ops/common/problem.h"
#include "ops/common/variant.h"

namespace lina::detail::delta {

// Segments of at most `segment_len` rows (a multiple of 64: segments start on the unsplit op's chunk borders).
struct SplitPlan {
  std::vector<Sequence> segments;   // in sequence order; a zero-length sequence has none
  std::vector<std::int64_t> first;  // N + 1 entries: sequence n owns segments [first[n], first[n + 1])
  std::int64_t segment_len = 0;
};
SplitPlan plan_split(const Problem& p, std::int64_t segment_len);

// The widest state a forward call takes (columns of v): the maps of step 1 go in one call up to it.
constexpr std::int64_t kSplitMaxWidth = 256;
// Shortest segment: below it each segment's fixed cost (a prep item, a state CTA's start) outweighs the chain.
constexpr std::int64_t kSplitMinSegment = 1024;

// Why the split does not pay at this problem on a GPU of `sms` SMs (a sentence), or nullopt; and the segment length
// it then takes (docs/kernels/chunk_delta_fwd.md, "Sequence split": when it runs).
Decline split_declines(const Problem& p, int sms);
std::int64_t split_segment_length(const Problem& p, int sms);

// Step 2's inputs: X rows of x_pitch floats (segment s, head h at X + ((s * HV + h) * K) * x_pitch), Y likewise with
// y_pitch; h0 [N,HV,K,V] or null; entering [segments,HV,K,V]; ht [N,HV,K,V] or null; first: the plan's N + 1 bounds.
struct CombineArgs {
  const float* X;
  std::int64_t x_pitch;
  const float* Y;
  std::int64_t y_pitch;
  const float* h0;
  float* entering;
  float* ht;
  const std::int64_t* first;
  std::int64_t N, HV, K, V;
};

// What the steps need from a backend; memory lives on the op's device.
struct SplitOps {
  void* (*alloc)(std::size_t bytes, void* stream, const char* what);
  void (*release)(void* ptr, void* stream, const char* what);
  // dst [rows][width] (elements of `elem` bytes): columns col0 .. col0 + cols set to zero; the rest untouched
  void (*zero_columns)(void* dst, std::int64_t width, std::int64_t col0, std::int64_t rows, std::int64_t cols, std::size_t elem,
                       void* stream);
  // dst [rows][width] gets src [rows][cols] at column offset col0; the rest untouched
  void (*copy_columns)(void* dst, std::int64_t width, std::int64_t col0, const void* src, std::int64_t rows, std::int64_t cols,
                       std::size_t elem, void* stream);
  // states [count][K][width] = [I | 0]
  void (*identity_states)(float* states, std::int64_t count, std::int64_t K, std::int64_t width, void* stream);
  void (*combine)(const CombineArgs& c, void* stream);
};
const SplitOps& cpu_split_ops();  // host memory and loops: the CPU backend, and the split's tests in CI

// The split forward: `forward(problem, args, outputs)` is the backend's unsplit forward, called twice or three times.
template <class Args, class Forward>
RunInfo run_split(const Problem& p, const Args& a, const AttentionOutputs& out, const SplitPlan& plan, const SplitOps& ops,
                  void* stream, Forward&& forward);

// ---- run_split

template <class Args, class Forward>
RunInfo run_split(const Problem& p, const Args& a, const AttentionOutputs& out, const SplitPlan& plan, const SplitOps& ops,
                  void* stream, Forward&& forward) {
  using i64 = std::int64_t;
  const i64 R = p.B * p.T, HV = p.HV, K = p.K, V = p.V, NS = static_cast<i64>(plan.segments.size());
  const std::size_t ev = dtype_size(a.v.dtype), eo = dtype_size(out.o.dtype), ef = sizeof(float);
  const auto view = [&](void* data, DType dt, Shape s) { return TensorView::contiguous(data, dt, s, p.device, p.device_index); };
  // the segments as a varlen problem over the same rows (q, k, g, beta are read in place)
  Problem ps = p;
  ps.B = 1;
  ps.T = R;
  ps.N = NS;
  ps.varlen = true;
  ps.sequences = plan.segments;
  Args base = a;
  base.cu_seqlens.reset();
  base.cu_seqlens_cpu.reset();
  base.initial_state.reset();
  const bool fused = K + V <= kSplitMaxWidth;  // [X | Y] from one call
  const i64 W = fused ? K + V : K;
  std::vector<std::pair<void*, const char*>> owned;
  const auto take = [&](i64 bytes, const char* what) {
    void* x = ops.alloc(static_cast<std::size_t>(bytes), stream, what);
    owned.emplace_back(x, what);
    return x;
  };
  const auto release_all = [&] {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it) ops.release(it->first, stream, it->second);
    owned.clear();
  };
  RunInfo info{};
  try {
    // 1. maps: values [0 | v] (or 0 alone) from [I | 0]
    void* vals = take(R * HV * W * static_cast<i64>(ev), "split values");
    ops.zero_columns(vals, W, 0, R * HV, K, ev, stream);  // every row's first K columns (W = K without v)
    if (fused) ops.copy_columns(vals, W, K, a.v.data, R * HV, V, ev, stream);
    auto* start = static_cast<float*>(take(NS * HV * K * W * static_cast<i64>(ef), "split map start"));
    ops.identity_states(start, NS * HV, K, W, stream);
    void* o_map = take(R * HV * W * static_cast<i64>(eo), "split map outputs");
    auto* maps = static_cast<float*>(take(NS * HV * K * W * static_cast<i64>(ef), "split maps"));
    Args am = base;
    am.v = view(vals, a.v.dtype, {1, R, HV, W});
    am.initial_state = view(start, DType::f32, {NS, HV, K, W});
    Problem pm = ps;
    pm.V = W;
    info = forward(pm, am, AttentionOutputs{view(o_map, out.o.dtype, {1, R, HV, W}), view(maps, DType::f32, {NS, HV, K, W})});
    const float* X = maps;
    const float* Y = maps + K;
    i64 y_pitch = W;
    if (!fused) {  // Y from a zero start; o is step 3's output, so it serves as this call's scratch
      auto* contrib = static_cast<float*>(take(NS * HV * K * V * static_cast<i64>(ef), "split contributions"));
      forward(ps, base, AttentionOutputs{view(out.o.data, out.o.dtype, {1, R, HV, V}), view(contrib, DType::f32, {NS, HV, K, V})});
      Y = contrib;
      y_pitch = V;
    }
    // 2. entering states and the final states
    auto* entering = static_cast<float*>(take(NS * HV * K * V * static_cast<i64>(ef), "split entering states"));
    ops.combine(CombineArgs{X, W, Y, y_pitch, a.initial_state ? a.initial_state->template ptr<const float>() : nullptr, entering,
                            out.final_state ? out.final_state->template ptr<float>() : nullptr, plan.first.data(), p.N, HV, K, V},
                stream);
    // 3. outputs from the entering states
    Args ao = base;
    ao.initial_state = view(entering, DType::f32, {NS, HV, K, V});
    const RunInfo last = forward(ps, ao, AttentionOutputs{view(out.o.data, out.o.dtype, {1, R, HV, V}), std::nullopt});
    info.kernels.push_back("lina::split_combine");
    info.kernels.insert(info.kernels.end(), last.kernels.begin(), last.kernels.end());
  } catch (...) {
    try {
      release_all();
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
  release_all();
  return info;
}

}  // namespace lina::detail::delta
