// chunk_gla forward on CUDA: the variant table of the site chunk_gla.fwd and the launches of each
// kernel family (ops/gla/cuda/fwd/: fused, ws, wg128, d256, segstate). Few (sequence, head) pairs:
// sequences are cut into segments; pass 1 computes each segment's local state and decay, pass 2 starts
// every segment from the combined state (plan_segments).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/variant.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/workspace.h"
#include "ops/gla/cuda/fwd/common.cuh"
#include "ops/gla/cuda/fwd/d256.cuh"
#include "ops/gla/cuda/fwd/fused.cuh"
#include "ops/gla/cuda/fwd/segstate.cuh"
#include "ops/gla/cuda/fwd/wg128.cuh"
#include "ops/gla/cuda/fwd/ws.cuh"

namespace lina::detail::cuda {
namespace {

using namespace cuda_util;

// The pass a launch runs, in the parameters every forward kernel reads (v4, v5, the D256 state kernel).
int& pass_mode(Params& p) { return p.mode; }
int& pass_mode(D256Params& d) { return d.p.mode; }

// Pass 1 of a split call by chunk_gla_fwd_segstate, in its kernel mode: kSegstateFast takes the
// factorised piece where the gates allow it, kSegstateExact every piece by the exact token recurrence
// (the path pieces with growing gates take; the variant exact_segment_states reaches it with ordinary
// gates, for the tests).
constexpr int kSegstateFast = 1, kSegstateExact = 3;
template <int K, int VT>
void launch_segstate(Params prm, dim3 grid, cudaStream_t st) {
  using C = SegCfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_segstate<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_segstate");
  chunk_gla_fwd_segstate<K, VT><<<grid, C::NT, C::smem, st>>>(prm);
  check(cudaGetLastError(), "chunk_gla_fwd_segstate launch (segment states)");
}
using SegstateLaunch = void (*)(Params, dim3, cudaStream_t);
// The split pass 1 of a chunk kernel's configuration: none at K = 256 (v4 <256,64> keeps its own mode 1).
template <int K, int VT>
constexpr SegstateLaunch segstate_launcher() {
  if constexpr (K == 256) return nullptr;
  else return launch_segstate<K, VT>;
}

// One launch (mode 0), or with the sequence split pass 1 (segment states, mode 1) then pass 2 (mode 2).
// Returns what the split adds to the kernel's reported name.
// With a segstate launcher, pass 1 runs it in segstate_mode; without one, the chunk kernel's own mode 1.
template <class P>
std::string launch_passes(void (*kernel)(P), P prm, dim3 grid, unsigned threads, std::size_t smem, bool split,
                          cudaStream_t st, const char* what, void (*segstate)(P, dim3, cudaStream_t) = nullptr,
                          int segstate_mode = kSegstateFast) {
  const std::string msg = std::string(what) + " launch";
  if (!split) {
    pass_mode(prm) = 0;
    kernel<<<grid, threads, smem, st>>>(prm);
    check(cudaGetLastError(), msg.c_str());
    return "";
  }
  const int seg_mode = segstate ? segstate_mode : 0;
  if (seg_mode != 0) {
    pass_mode(prm) = seg_mode;
    segstate(prm, grid, st);
  } else {
    pass_mode(prm) = 1;
    kernel<<<grid, threads, smem, st>>>(prm);
    check(cudaGetLastError(), (msg + " (segment states)").c_str());
  }
  pass_mode(prm) = 2;
  kernel<<<grid, threads, smem, st>>>(prm);
  check(cudaGetLastError(), msg.c_str());
  return seg_mode != 0 ? " x2 (sequence split, segment states by chunk_gla_fwd_segstate)" : " x2 (sequence split)";
}

template <int K, int VT>
std::string launch_ws(Params prm, int items, const Problem& p, bool split, int segstate_mode, cudaStream_t st) {
  using C = WsCfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_ws<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_ws");
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  return "chunk_gla_fwd_ws<" + std::to_string(K) + "," + std::to_string(VT) + ">" +
         launch_passes(chunk_gla_fwd_ws<K, VT>, prm, grid, C::NT, C::smem, split, st, "chunk_gla_fwd_ws", launch_segstate<K, VT>,
                       segstate_mode);
}

// wgmma_a: A by wgmma in the producers (the default), else by mma.sync (wgmma in the consumers only).
std::string launch_wg128(Params prm, int items, const Problem& p, bool split, bool wgmma_a, int segstate_mode, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(p.V / wg128::VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  if (wgmma_a) {
    set_max_dynamic_smem(chunk_gla_fwd_wg128<true>, static_cast<int>(wg128::smem), "chunk_gla_fwd_wg128");
    return "chunk_gla_fwd_wg128<128,128,wgmma A>" +
           launch_passes(chunk_gla_fwd_wg128<true>, prm, grid, wg128::NT, wg128::smem, split, st, "chunk_gla_fwd_wg128",
                         launch_segstate<128, 128>, segstate_mode);
  }
  set_max_dynamic_smem(chunk_gla_fwd_wg128<false>, static_cast<int>(wg128::smem), "chunk_gla_fwd_wg128");
  return "chunk_gla_fwd_wg128<128,128>" + launch_passes(chunk_gla_fwd_wg128<false>, prm, grid, wg128::NT, wg128::smem, split, st, "chunk_gla_fwd_wg128",
                                                             launch_segstate<128, 128>, segstate_mode);
}

// K = 256: the prep kernel (operands once per chunk and head) and the state kernel per 64-column V tile.
// The workspace holds one record per (chunk, head): ~0.85x the bytes of q, k and g.
std::vector<std::string> launch_d256(Params prm, int items, const Problem& p, bool split, std::size_t ws_bytes, cudaStream_t st) {
  using namespace d256;
  const DeviceSeqs seqs = upload_sequences(p, st);
  unsigned char* ws = nullptr;
  try {
    ws = workspace_alloc_as<unsigned char>(ws_bytes, st, "chunk_gla fwd D256 operands");
  } catch (const Error&) {  // out of device memory: v4 <256,64> needs no operand workspace (the caller runs it)
    (void)cudaGetLastError();
    workspace_free(seqs.ptr, st, "sequence table");
    return {};
  }
  D256Params dp{prm, seqs.view, static_cast<int>(p.N), ws};
  set_max_dynamic_smem(chunk_gla_fwd_d256_prep, static_cast<int>(prep_smem), "chunk_gla_fwd_d256_prep");
  set_max_dynamic_smem(chunk_gla_fwd_d256_state_wg, static_cast<int>(wstate_smem), "chunk_gla_fwd_d256_state_wg");
  if (seqs.total_chunks > 0) {
    chunk_gla_fwd_d256_prep<<<static_cast<unsigned>(seqs.total_chunks * p.H), NT, prep_smem, st>>>(dp);
    check(cudaGetLastError(), "chunk_gla_fwd_d256_prep launch");
  }
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  const std::string state = std::string("chunk_gla_fwd_d256_state_wgmma<256,64>") +
                            launch_passes(chunk_gla_fwd_d256_state_wg, dp, grid, NT, wstate_smem, split, st, "chunk_gla_fwd_d256_state_wg");
  workspace_free(ws, st, "chunk_gla fwd D256 operands");
  workspace_free(seqs.ptr, st, "sequence table");
  return {"chunk_gla_fwd_d256_prep", state};
}

// Bytes of the K = 256 operand workspace (82 KB per chunk and head, below the 128 KB of FLA's bf16 chunk
// states); past kD256MaxWorkspace v4 <256,64> runs instead (it needs none).
constexpr std::size_t kD256MaxWorkspace = 8ull << 30;
std::size_t d256_workspace_bytes(const Problem& p) {
  std::size_t chunks = 0;
  for (const auto& sq : p.sequences) chunks += static_cast<std::size_t>((sq.length + kC - 1) / kC);
  return chunks * static_cast<std::size_t>(p.H) * d256::wrec_bytes;
}

template <int K, int VT>
std::string launch(Params prm, int items, const Problem& p, bool split, int segstate_mode, cudaStream_t st) {
  using C = Cfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_fused<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_fused");
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  return "chunk_gla_fwd_fused<" + std::to_string(K) + "," + std::to_string(VT) + ">" +
         launch_passes(chunk_gla_fwd_fused<K, VT>, prm, grid, C::NT, C::smem, split, st, "chunk_gla_fwd_fused",
                       segstate_launcher<K, VT>(), segstate_mode);
}

// Sequence split: when the (sequence, head, V tile) CTAs fill less than half of the GPU's CTA slots,
// each sequence is cut into up to `slots / ctas` segments of whole chunks, at least 2 chunks each. Pass 1
// keeps one fp32 [K, V] state (+ K decays) per segment but the last of each sequence: per sequence at
// most nch/2 - 1 of them, below FLA's per-chunk bf16 states (nch of them). slots_used counts them.
// Dense inputs get the count only (the kernel derives each item, work_item); varlen inputs get the table.
struct SegmentPlan {
  std::vector<WorkItem> items;  // varlen: one per CTA row
  std::int64_t rows = 0;        // CTA rows (grid z)
  std::int64_t slots = 0;       // pass-1 state slots
  int dense_nseg = 0;           // dense: segments per sequence
};

SegmentPlan plan_segments(const Problem& p, std::int64_t vtiles, int ctas_per_sm) {
  std::int64_t seg = 1;
  const std::int64_t ctas = p.N * p.H * vtiles, slots = static_cast<std::int64_t>(sm_count()) * ctas_per_sm;
  if (ctas > 0 && 2 * ctas <= slots) seg = slots / ctas;
  const auto segments = [seg](std::int64_t length) { return std::max<std::int64_t>(1, std::min(seg, (length + kC - 1) / kC / 2)); };
  SegmentPlan plan;
  if (!p.varlen) {
    const std::int64_t ns = segments(p.T);
    plan.dense_nseg = static_cast<int>(ns);
    plan.rows = p.N * ns;
    plan.slots = p.N * (ns - 1);
    return plan;
  }
  for (std::int64_t n = 0; n < p.N; ++n) {
    const auto& sq = p.sequences[static_cast<std::size_t>(n)];
    const std::int64_t nch = (sq.length + kC - 1) / kC, ns = segments(sq.length);
    for (std::int64_t u = 0; u < ns; ++u) {
      const std::int64_t c0 = u * nch / ns, c1 = (u + 1) * nch / ns;
      const std::int64_t t0 = c0 * kC, t1 = std::min<std::int64_t>(sq.length, c1 * kC);
      plan.items.push_back({sq.row_begin + t0, static_cast<int>(t1 - t0), static_cast<int>(n), static_cast<int>(u), static_cast<int>(ns),
                            static_cast<int>(plan.slots)});
    }
    plan.slots += ns - 1;
  }
  plan.rows = static_cast<std::int64_t>(plan.items.size());
  return plan;
}

// What one forward call hands to its variant (arguments validated, kernel-wide limits checked).
struct FwdCall {
  const Problem& p;
  const ChunkGlaArgs& a;
  const AttentionOutputs& out;
  cudaStream_t st;
};

// The kernel families of the forward; a variant is one of them with its V tile width and split pass 1.
enum class Family { fused, ws, wg128_wgmma_a, wg128_mma_a, d256 };
struct Choice {
  Family family;
  int vt;  // V columns per CTA
  int segstate_mode = kSegstateFast;
};

RunInfo run_choice(const FwdCall& c, const Choice ch) {
  const Problem& p = c.p;
  const ChunkGlaArgs& a = c.a;
  const cudaStream_t st = c.st;
  Params prm{};
  prm.q = a.q.ptr<const __nv_bfloat16>();
  prm.k = a.k.ptr<const __nv_bfloat16>();
  prm.v = a.v.ptr<const __nv_bfloat16>();
  prm.g = a.g.ptr<const __nv_bfloat16>();
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.o = c.out.o.ptr<__nv_bfloat16>();
  prm.ht = c.out.final_state ? c.out.final_state->ptr<float>() : nullptr;
  prm.H = static_cast<int>(p.H);
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.scale = static_cast<float>(p.scale);
  const SegmentPlan plan = plan_segments(p, p.V / ch.vt, p.K == 64 ? 2 : 1);
  const std::int64_t slots = plan.slots;
  const bool split = slots > 0;
  std::string name = "chunk_gla_fwd_fused";
  if (plan.rows == 0) return RunInfo{"cuda", {name}};
  // Work items and heads are grid dimensions z and y (at most 65535 each).
  if (plan.rows > 65535)
    throw_unsupported(a.cu_seqlens ? "cu_seqlens" : "q", std::to_string(p.N) + " sequences", "at most 65535 sequences (the CUDA chunk_gla kernel)");
  if (p.H > 65535) throw_unsupported("H", std::to_string(p.H), "at most 65535 heads (the CUDA chunk_gla kernel)");
  float* scratch = nullptr;
  WorkItem* d_items = plan.items.empty() ? nullptr
                                         : static_cast<WorkItem*>(upload_table(plan.items.data(), plan.items.size() * sizeof(WorkItem), st,
                                                                               "chunk_gla fwd work items"));
  prm.items = d_items;
  prm.dense_T = static_cast<int>(p.T);
  prm.dense_nseg = plan.dense_nseg;
  if (split) {
    const std::size_t ns = static_cast<std::size_t>(slots), hs = static_cast<std::size_t>(p.H);
    const std::size_t state_elems = ns * hs * static_cast<std::size_t>(p.K * p.V), decay_elems = ns * hs * static_cast<std::size_t>(p.K);
    scratch = workspace_alloc_as<float>(state_elems + decay_elems, st, "chunk_gla fwd segment states");
    prm.seg_state = scratch;
    prm.seg_decay = scratch + state_elems;
  }
  const int ni = static_cast<int>(plan.rows);
  if (ch.family == Family::d256) {
    std::vector<std::string> names = launch_d256(prm, ni, p, split, d256_workspace_bytes(p), st);
    if (!names.empty()) {
      workspace_free(scratch, st, "chunk_gla fwd segment states");
      workspace_free(d_items, st, "chunk_gla fwd work items");
      return RunInfo{"cuda", std::move(names)};
    }
    // (no device memory for the operand workspace: v4 <256,64> below needs none)
  }
  const int sm = ch.segstate_mode;
  switch (ch.family) {
    case Family::ws: name = p.K == 64 ? launch_ws<64, 64>(prm, ni, p, split, sm, st) : launch_ws<128, 128>(prm, ni, p, split, sm, st); break;
    case Family::wg128_wgmma_a: name = launch_wg128(prm, ni, p, split, true, sm, st); break;
    case Family::wg128_mma_a: name = launch_wg128(prm, ni, p, split, false, sm, st); break;
    case Family::fused:
    case Family::d256:
      name = p.K == 64    ? launch<64, 64>(prm, ni, p, split, sm, st)
             : p.K == 256 ? launch<256, 64>(prm, ni, p, split, sm, st)
             : ch.vt == 128 ? launch<128, 128>(prm, ni, p, split, sm, st)
                            : launch<128, 64>(prm, ni, p, split, sm, st);
      break;
  }
  workspace_free(scratch, st, "chunk_gla fwd segment states");
  workspace_free(d_items, st, "chunk_gla fwd work items");
  return RunInfo{"cuda", {name}};
}

std::string head_dims(const Problem& p) { return "K = " + std::to_string(p.K) + ", V = " + std::to_string(p.V); }
bool wide_k128(const Problem& p) { return p.K == 128 && p.V % 128 == 0; }

// The variants of the forward, in order of preference (docs/kernels/chunk_gla_fwd.md). On the H200:
// K = 256 prep + state 1.46 vs v4's 2.74 ms at B8_T2048_H32_D256; K = 128 wg128 with A by wgmma 0.524
// vs mma.sync v5's 0.642 and v4's 0.891 ms at B1_T8192_H96_D128; K = 64 v5 0.045 vs v4's 0.052 ms
// at B8_T1024_H8_D64. The variants after "fused" run only when named (tests, A/B measurements).
Decline d256_supports(const FwdCall& c) {
  if (c.p.K != 256) return head_dims(c.p) + " (prep + state runs K = 256)";
  // The prep grid is chunks x heads CTAs in one dimension (at most 2^31 - 1); past kD256MaxWorkspace
  // the fused <256,64> kernel runs instead, which needs no operand workspace.
  const std::size_t ws = d256_workspace_bytes(c.p);
  if (ws > kD256MaxWorkspace) return "an operand workspace of " + std::to_string(ws) + " bytes (at most 8 GiB)";
  if (ws / d256::wrec_bytes >= (1ull << 31)) return std::to_string(ws / d256::wrec_bytes) + " chunks x heads (at most 2^31 - 1)";
  return std::nullopt;
}
Decline wg128_supports(const FwdCall& c) {
  if (!wide_k128(c.p)) return head_dims(c.p) + " (wg128 runs K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline ws_supports(const FwdCall& c) {
  if (c.p.K != 64 && !wide_k128(c.p)) return head_dims(c.p) + " (ws runs K = 64, or K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline any_supports(const FwdCall&) { return std::nullopt; }  // every K and V the front door lets through
Decline fused_vt128_supports(const FwdCall& c) {
  if (!wide_k128(c.p)) return head_dims(c.p) + " (fused_vt128 runs K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline exact_segment_states_supports(const FwdCall& c) {
  if (c.p.K == 256) return head_dims(c.p) + " (the K = 256 kernels compute segment states in their own pass 1, which has no exact mode)";
  return std::nullopt;
}
// The default kernel below K = 256 (the first of wg128, ws, fused that supports the call).
Choice default_below_k256(const Problem& p) {
  if (wide_k128(p)) return {Family::wg128_wgmma_a, 128};
  if (p.K == 64) return {Family::ws, 64};
  return {Family::fused, 64};
}

const Variant<FwdCall> kForwardVariants[] = {
    {"d256_prep_state", d256_supports, [](const FwdCall& c) { return run_choice(c, {Family::d256, 64}); }},
    {"wg128", wg128_supports, [](const FwdCall& c) { return run_choice(c, {Family::wg128_wgmma_a, 128}); }},
    {"ws", ws_supports, [](const FwdCall& c) { return run_choice(c, {Family::ws, c.p.K == 64 ? 64 : 128}); }},
    {"fused", any_supports, [](const FwdCall& c) { return run_choice(c, {Family::fused, 64}); }},
    // wg128 with A by mma.sync in the producers (wgmma in the consumers only): 0.652 ms at B1_T8192_H96_D128.
    {"wg128_mma_a", wg128_supports, [](const FwdCall& c) { return run_choice(c, {Family::wg128_mma_a, 128}); }},
    {"fused_vt128", fused_vt128_supports, [](const FwdCall& c) { return run_choice(c, {Family::fused, 128}); }},
    // The default kernel with every split piece of pass 1 by the exact token recurrence.
    {"exact_segment_states", exact_segment_states_supports,
     [](const FwdCall& c) {
       Choice ch = default_below_k256(c.p);
       ch.segstate_mode = kSegstateExact;
       return run_choice(c, ch);
     }},
};

}  // namespace

RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode,
                          const ExecOptions& opts) {
  (void)mode;  // training and inference run the same kernel: the backward recomputes what it needs
  if (a.q.dtype != DType::bf16)
    throw_unsupported("q", "dtype " + std::string(dtype_name(a.q.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (a.g.dtype != DType::bf16)
    throw_unsupported("g", "dtype " + std::string(dtype_name(a.g.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.K)) throw_unsupported("K", std::to_string(p.K), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.V)) throw_unsupported("V", std::to_string(p.V), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  // cp.async moves 16-byte vectors of q, k, g, v; o is written as bf16 pairs.
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"o", &out.o}}, " (the CUDA chunk_gla kernel)");
  const FwdCall call{p, a, out, static_cast<cudaStream_t>(opts.stream)};
  return run_variant(std::span<const Variant<FwdCall>>(kForwardVariants), "chunk_gla.fwd", opts, call);
}

}  // namespace lina::detail::cuda
