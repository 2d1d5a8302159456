// chunk_kda / chunk_gdn forward on sm_90a in two kernels per call (docs/kernels/chunk_delta_fwd.md,
// "Thin workspace").
//
// 1. A prep kernel per (chunk, value head) item, fully parallel, persistent grid (as many CTAs as fit;
//    each walks items with the next item's loads in flight): the gate cumsum, the q/k norms, L and
//    Aqk, (I+L)^-1, and only what the state recurrence cannot form from the raw inputs.
//    - GDN (gdn_wg_prep_kernel, fwd/gdn_prep.cuh: one warpgroup per CTA, wgmma): T' = (I+A)^-1 diag(beta)
//      and Q' in bf16 and four per-token factor rows: the scalar gate and the norms stay per-token factors.
//    - KDA (kda_prep_kernel, fwd/kda_prep.cuh): the per-channel gate must be applied to q and k here, so it writes
//      the gated tiles q e^b, k e^b, k e^(bL-b), Aqk (bf16), e^bL and T' (hi + lo).
// 2. delta_thin_state_kernel<KDA, K, VW> (fwd/state.cuh): one warpgroup per (sequence, value
//    head, 64-column V tile; two splitting the channels at K = 256; VW = 2: two V tiles of a head per CTA
//    sharing the operand tiles) walks the chunks in order with H^T in wgmma accumulators:
//    v_new = T' (v - k1 H), o = q1 H + Aqk v_new, H = e^bL H + k3^T v_new (with GDN's factors).
// Tensor-core products use mma.sync m16n8k16 bf16 -> fp32 in the KDA prep and wgmma in the GDN prep and the state kernel;
// the (I+L)^-1 block merges use mma.sync m16n8k8 tf32 (FLA's precision). Gates are kept as log2
// cumsums and only non-positive differences are exponentiated, except KDA's safe_gate diagonal
// sub-blocks, whose middle reference row bounds the factors by 2^(8*|lower_bound|*log2e) <= e^40
// (docs/math.md section 5). Beyond FLA's precision map, T' enters as two bf16 terms (x = hi + lo): its single
// bf16 rounding is what the no-decay (g = 0) cases cannot afford. Aqk and v_new enter o as one bf16 plane
// each, as in FLA (kQPlanes).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/tensor_map.h"
#include "ops/common/cuda/workspace.h"
#include "ops/common/fast_div.h"
#include "ops/common/problem.h"
#include "ops/delta/cuda/fwd/gdn_prep.cuh"
#include "ops/delta/cuda/fwd/kda_prep.cuh"
#include "ops/delta/cuda/fwd/params.cuh"
#include "ops/delta/cuda/fwd/state.cuh"
#include "ops/delta/cuda_launch.h"

namespace lina::detail::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace cuda_util;

[[noreturn]] void cuda_fail(const char* what, cudaError_t e) {
  throw Error(ErrorCode::runtime, "", std::string("chunk_delta cuda: ") + what + ": " + cudaGetErrorString(e));
}

size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }

// Launches `kern` with `smem` bytes of dynamic shared memory, its attribute set once per device
// (launch_setup) for the kernel that actually runs.
void launch_smem(void (*kern)(Params), std::size_t grid, int threads, std::size_t smem, const Params& prm, cudaStream_t st,
                 const char* name) {
  set_max_dynamic_smem(kern, static_cast<int>(smem), name);
  kern<<<static_cast<unsigned>(grid), threads, smem, st>>>(prm);
}

// A prep launch: a persistent grid of as many CTAs as fit at once, each striding over the (chunk, value
// head) items.
void launch_prep(void (*kern)(Params), std::size_t smem, std::size_t items, int sms, const Params& prm, cudaStream_t st,
                 const char* name, int threads = kThreads) {
  set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // before the occupancy query
  const int per_sm = std::max(1, max_active_blocks(kern, threads, smem, name));
  const std::size_t grid = std::min(items, static_cast<std::size_t>(per_sm) * static_cast<std::size_t>(sms > 0 ? sms : 1));
  launch_smem(kern, grid, threads, smem, prm, st, name);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) cuda_fail("prep kernel launch", e);
}

// One forward call: the sequence table (varlen only), the workspace from lina's pool (kept mapped
// between calls), the prep over every (chunk, value head), then the state kernel over every (sequence,
// value head, 64-column V tile); also with no chunks at all (ht = h0). Each workspace array starts
// 256-byte aligned, so every tile is 16-byte aligned for the bulk copies.
//   GDN: T' (kTTileBytes), Q' (kQTileBytes) and the four factor rows per chunk and head (25 KB at any K, V).
//   KDA: k e^b, q e^b, k e^(bL-b) (kTileBytes<K> each), Aqk (kQTileBytes), T' (kTTileBytes), e^bL (72.5 KB at K = 128).
// Returns the state kernel's V tiles per CTA (VW).
template <bool KDA, int K>
int run(Params prm, const Problem& p, cudaStream_t st, GdnPrep prep) {
  const int sms = sm_count();
  const DeviceSeqs seqs = upload_sequences(p, st);  // dense: no table
  prm.seqs = seqs.view;
  prm.N = static_cast<int>(p.N);
  prm.fd_nch = FastDiv(static_cast<std::uint32_t>((seqs.view.uniform_len + kC - 1) / kC));
  const size_t nch = static_cast<size_t>(seqs.total_chunks) * p.HV;
  unsigned char* ws = nullptr;
  if (nch > 0) {
    if (nch > static_cast<size_t>(INT32_MAX)) throw_unsupported("q", "more than 2^31 chunk-heads", "fewer chunk-heads");
    prm.nitems = static_cast<int>(nch);
    const size_t b_t = align256(nch * kTTileBytes), b_a = align256(nch * kQTileBytes);
    if constexpr (KDA) {
      const size_t b_ck = align256(nch * kTileBytes<K>), b_el = align256(nch * K * sizeof(float));
      ws = static_cast<unsigned char*>(workspace_alloc(3 * b_ck + b_a + b_el + b_t, st, "delta fwd workspace"));
      prm.ws = {reinterpret_cast<bf16*>(ws), reinterpret_cast<bf16*>(ws + b_ck), reinterpret_cast<bf16*>(ws + 2 * b_ck),
                reinterpret_cast<bf16*>(ws + 3 * b_ck), reinterpret_cast<float*>(ws + 3 * b_ck + b_a)};
      prm.tw = {reinterpret_cast<bf16*>(ws + 3 * b_ck + b_a + b_el), nullptr, nullptr};
      launch_prep(kda_prep_kernel<K>, sizeof(PrepSmem<K>), nch, sms, prm, st, "kda_prep_kernel");
    } else {
      if constexpr (K >= 128) {  // the prep takes q / k by TMA boxes there (fwd/gdn_prep.cuh); the maps are encoded before
        // the workspace is taken (a refusal leaves nothing allocated), and a box's row coordinate is an int
        const std::int64_t rows = p.B * p.T;
        if (rows > INT32_MAX)
          throw_unsupported("q", std::to_string(rows) + " token rows on the GDN forward's TMA path", "at most 2^31 - 1 rows");
        prm.tm_q = tensor_map_bf16_rows_heads_cols(prm.q, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(p.H),
                                                   static_cast<std::uint64_t>(K), 64, kC, "q");
        prm.tm_k = tensor_map_bf16_rows_heads_cols(prm.k, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(p.H),
                                                   static_cast<std::uint64_t>(K), 64, kC, "k");
      }
      const size_t b_sc = align256(nch * 4 * kC * sizeof(float));
      ws = static_cast<unsigned char*>(workspace_alloc(b_t + b_a + b_sc, st, "delta fwd workspace"));
      prm.tw = {reinterpret_cast<bf16*>(ws), reinterpret_cast<bf16*>(ws + b_t), reinterpret_cast<float*>(ws + b_t + b_a)};
      // One warpgroup per CTA, wgmma q k^T / k k^T (fwd/gdn_prep.cuh): H200 B1_T8192_H96_D128 prep
      // 0.364 -> 0.318 ms against the 8-warp mma.sync gdn_thin_prep_kernel it replaced, whole forward 0.766 -> 0.720.
      // q / k reach it as TMA boxes: prep 0.270 -> 0.243 ms at the same shape
      bool sequential = false;
      if constexpr (K == 128) {
        sequential = prep == GdnPrep::per_sequence;
        if (sequential) {
          launch_smem(gdn_wg_prep_kernel<K, true>, static_cast<std::size_t>(p.N * p.HV), kWgThreads, kWgPrepSmemBytes<K>,
                      prm, st, "gdn_wg_prep_kernel seq");
          cudaError_t e = cudaGetLastError();
          if (e != cudaSuccess) cuda_fail("prep kernel launch", e);
        }
      }
      if (!sequential)
        launch_prep(gdn_wg_prep_kernel<K, false>, kWgPrepSmemBytes<K>, nch, sms, prm, st, "gdn_wg_prep_kernel", kWgThreads);
    }
  }
  // KDA: V-tile pairs (one read of the chunk's 72.5 KB of operand tiles per head instead of one per V tile)
  // where the one-tile grid would put two CTAs on an SM anyway; a grid within one SM each keeps one tile per
  // CTA (the pair would halve the SMs that run the latency-bound chains). H200, B1_T8192_H96_D128: KDA
  // forward 1.214 -> 1.179 ms, B4_T4096_H64 1.483 -> 1.467; GDN's pairs (raw q / k and 33 KB per head) were
  // 0.5-2 % slower, so GDN keeps one tile per CTA (docs/kernels/chunk_delta_fwd.md).
  const long tiles = p.N * p.HV * prm.nvt;
  const int vw = KDA && K <= 128 && prm.nvt % 2 == 0 && tiles > sms ? 2 : 1;
  if (tiles > 0) {
    if constexpr (KDA && K <= 128) {
      if (vw == 2)
        launch_smem(delta_thin_state_kernel<KDA, K, 2>, static_cast<std::size_t>(tiles / 2), kThinStateThreads<K, 2>,
                    kThinStateSmemBytes<KDA, K, 2>, prm, st, "delta_thin_state_kernel");
    }
    if (vw == 1)
      launch_smem(delta_thin_state_kernel<KDA, K, 1>, static_cast<std::size_t>(tiles), kThinStateThreads<K, 1>,
                  kThinStateSmemBytes<KDA, K, 1>, prm, st, "delta_thin_state_kernel");
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) cuda_fail("state kernel launch", e);
  }
  workspace_free(ws, st, "delta fwd workspace");
  workspace_free(seqs.ptr, st, "delta fwd sequence table");
  return vw;
}

// The kernels that ran, as RunInfo names them: the prep, then the state kernel <op, K, V tiles per CTA>.
template <bool KDA>
std::vector<std::string> dispatch(const Params& prm, const Problem& p, cudaStream_t st, GdnPrep prep) {
  int vw = 1;
  switch (p.K) {
    case 64: vw = run<KDA, 64>(prm, p, st, prep); break;
    case 128: vw = run<KDA, 128>(prm, p, st, prep); break;
    default: vw = run<KDA, 256>(prm, p, st, prep); break;
  }
  const std::string args = std::string(KDA ? "kda," : "gdn,") + std::to_string(p.K);
  return {std::string(KDA ? "lina::kda_prep_kernel<" : "lina::gdn_wg_prep_kernel<") + std::to_string(p.K) + ">",
          "lina::delta_thin_state_kernel<" + args + "," + std::to_string(vw) + ">"};
}

void require_dtype(const char* name, const TensorView& t, std::initializer_list<DType> ok, const char* expected) {
  for (DType d : ok)
    if (t.dtype == d) return;
  throw_unsupported(name, std::string("dtype ") + std::string(dtype_name(t.dtype)) + " on the cuda backend", expected);
}

Params common_params(const Problem& p, const DeltaRuleArgs& a, const AttentionOutputs& out, const char* op) {
  if (p.K != 64 && p.K != 128 && p.K != 256)
    throw_unsupported("q", std::string("head dim K = ") + std::to_string(p.K) + " for cuda " + op, "K in {64, 128, 256}");
  if (p.V % kVT != 0 || p.V > 256)
    throw_unsupported("v", std::string("head dim V = ") + std::to_string(p.V) + " for cuda " + op, "V in {64, 128, 192, 256}");
  require_dtype("q", a.q, {DType::bf16}, "bfloat16");
  require_dtype("k", a.k, {DType::bf16}, "bfloat16");
  require_dtype("v", a.v, {DType::bf16}, "bfloat16");
  require_dtype("g", a.g, {DType::bf16, DType::f32}, "bfloat16 or float32");
  require_dtype("beta", a.beta, {DType::bf16, DType::f32}, "bfloat16 or float32");
  if (a.A_log) require_dtype("A_log", *a.A_log, {DType::f32}, "float32");
  if (a.dt_bias) require_dtype("dt_bias", *a.dt_bias, {DType::f32}, "float32");
  if (a.initial_state) require_dtype("initial_state", *a.initial_state, {DType::f32}, "float32");
  for (const auto& [name, tv] : {NamedTensor{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"beta", &a.beta}, {"o", &out.o}})
    if (!tv->is_contiguous()) throw_unsupported(name, "a non-contiguous tensor", "contiguous tensors");
  // q, k, v, g by 16-byte cp.async, o by 16-byte stores, the final state by 8-byte stores
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"o", &out.o},
                     {"final_state", out.final_state ? &*out.final_state : nullptr}},
                    std::string(" (the CUDA ") + op + " forward)");
  Params prm{};
  prm.q = a.q.ptr<const bf16>();
  prm.k = a.k.ptr<const bf16>();
  prm.v = a.v.ptr<const bf16>();
  prm.g = a.g.data;
  prm.g_f32 = a.g.dtype == DType::f32;
  prm.beta = a.beta.data;
  prm.beta_f32 = a.beta.dtype == DType::f32;
  prm.A_log = a.A_log ? a.A_log->ptr<const float>() : nullptr;
  prm.dt_bias = a.dt_bias ? a.dt_bias->ptr<const float>() : nullptr;
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.ht = out.final_state ? out.final_state->ptr<float>() : nullptr;
  prm.o = out.o.ptr<bf16>();
  prm.H = static_cast<int>(p.H);
  prm.HV = static_cast<int>(p.HV);
  prm.fd_hv = FastDiv(static_cast<std::uint32_t>(p.HV));
  prm.G = static_cast<int>(p.group());
  prm.fd_g = FastDiv(static_cast<std::uint32_t>(p.group()));
  prm.V = static_cast<int>(p.V);
  prm.nvt = static_cast<int>(p.V / kVT);
  prm.scale = static_cast<float>(p.scale);
  prm.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  prm.beta_mult = a.allow_neg_eigval ? 2.f : 1.f;
  prm.l2norm = a.use_qk_l2norm_in_kernel;
  return prm;
}

}  // namespace

RunInfo kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, const ExecOptions& opts) {
  Params prm = common_params(p, a, out, "chunk_kda");
  prm.gate_mode = kGateGiven;
  if (a.use_gate_in_kernel) prm.gate_mode = a.lower_bound ? kGateLowerBound : kGateSoftplus;
  prm.lower_bound = a.lower_bound ? static_cast<float>(*a.lower_bound) : 0.f;
  // The middle-reference diagonal needs every g >= -5 (exp(8*5) fits fp32 easily); safe_gate promises it.
  prm.safe = a.safe_gate && a.lower_bound && *a.lower_bound >= -5.0;
  return RunInfo{"cuda", dispatch<true>(prm, p, static_cast<cudaStream_t>(opts.stream), GdnPrep::persistent)};
}

RunInfo gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, const ExecOptions& opts,
                    GdnPrep prep) {
  Params prm = common_params(p, a, out, "chunk_gdn");
  prm.gate_mode = a.use_gate_in_kernel ? kGateSoftplus : kGateGiven;
  prm.lower_bound = 0.f;
  prm.safe = 0;
  return RunInfo{"cuda", dispatch<false>(prm, p, static_cast<cudaStream_t>(opts.stream), prep)};
}

}  // namespace lina::detail::cuda
