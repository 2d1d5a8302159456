// chunk_kda / chunk_gdn backward on sm_90a (docs/kernels/chunk_delta_bwd.md).
//
// The CPU chunked backward (ops/delta/cpu_kernels.cpp, docs/math.md sections 4.2 / 4.3) as a pipeline of kernels with
// fp32 global scratch between them (tensor cores in A-D2; the SIMT grad_v / grad_k stay as fallbacks):
//   P  prep_qk      per (token, q/k head): l2norm (fp32) -> qn, kn, rstd; not launched where A normalises
//                   its bf16 q / k rows itself (Params::qk_inline, InlineQkRows) and D2 does too (K <= 128) or
//                   scales its half of the raw rows by A's rstd (K = 256, ScaledQkHalf)
//   A  chunk_prep   per (chunk, value head): gate activation + chunk cumsum b, beta sigmoid, Aqk, L,
//                   Tinv = (I+L)^-1, w = Tinv (k e^b beta), u = Tinv (v beta); w, kg, qg, Aqk, e^bL as
//                   the state passes' shared-memory images (ChunkImage)
//   B  state_fwd    per (sequence, value head, 64-column V tile), chunks in order: H_n, v_new
//   C  state_bwd    same grid, chunks in reverse: dh[n], dvn = Aqk^T dO + kg dh[n], dh0
//   D1 grad_v       per (chunk, value head), loops over V tiles: dq_e, dk_e, dw, dAqk, dT's v part,
//                   dv (final), rowsum(H*dh), dbeta's v part
//   D2 grad_k       per (chunk, value head): WY backward, dAkk, intra (exact per-channel exps), db
//                   -> reverse chunk cumsum -> dg (w.r.t. the activated gate), dbeta (w.r.t. beta)
//   E1 post_qk      per (token, q/k head): GVA group sum of dq/dk, l2norm backward; not launched where one
//                   value head owns each q/k head (Params::fuse_qk: D2's tail does it, at K = 256 with the CTA
//                   pair's row dots swapped, PairRowDots)
//   E2 post_gate    per (token, value head): beta sigmoid and gate backward (+ parameter partials)
//   F  param_partial per (row part, value head), param_finish per value head: dA_log, ddt_bias (double sums in a
//      fixed order)
// Gate cumsums are natural-log and only non-positive differences are exponentiated (docs/math.md section 5);
// rows past a sequence's end are zero with gate 0, so they contribute nothing and never overflow.
// GDN runs the KDA code with its scalar gate broadcast over K (the sum over K of KDA's dg is GDN's dg).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/workspace.h"
#include "ops/common/problem.h"
#include "ops/common/scratch_plan.h"
#include "ops/delta/cuda/bwd/chunk_image.cuh"
#include "ops/delta/cuda/bwd/chunk_prep.cuh"
#include "ops/delta/cuda/bwd/gate_kernels.cuh"
#include "ops/delta/cuda/bwd/grad_k.cuh"
#include "ops/delta/cuda/bwd/grad_k_v2.cuh"
#include "ops/delta/cuda/bwd/grad_v.cuh"
#include "ops/delta/cuda/bwd/grad_v4.cuh"
#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/qk_kernels.cuh"
#include "ops/delta/cuda/bwd/state_passes.cuh"
#include "ops/delta/cuda_launch.h"

namespace lina::detail::cuda {
namespace {

template <int K>
struct SmemSize {
  static constexpr int KP = K + 1;
  static constexpr size_t D1 = sizeof(GradVSmem<K>);
  static constexpr size_t D2 = sizeof(float) * (4 * kC * KP + 4 * kC * kP64 + 2 * kC + 2 * K);
};
static_assert(SmemSize<128>::D2 <= 227 * 1024, "grad_k_kernel<128> shared memory over the sm_90 limit");

template <class Kern>
void launch(Kern kern, dim3 grid, int threads, size_t smem, cudaStream_t st, const Params& prm, const char* name) {
  if (grid.x == 0 || grid.y == 0) return;
  if (smem > 48 * 1024) cuda_util::set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // once per device
  kern<<<grid, threads, smem, st>>>(prm);
  cuda_util::check(cudaGetLastError(), name);
}

// The same as clusters of `cluster` CTAs along x (thread block clusters; grid.x a multiple of it): the K = 256 kernels,
// whose CTA pairs split the channels (StateSlice in bwd/state_passes.cuh, grad_k_v2 in bwd/grad_k_v2.cuh).
// cluster = 1 is the plain launch.
template <class Kern>
void launch_clusters(Kern kern, dim3 grid, int threads, size_t smem, cudaStream_t st, const Params& prm, const char* name,
                     unsigned cluster) {
  if (cluster == 1) return launch(kern, grid, threads, smem, st, prm, name);
  if (grid.x == 0 || grid.y == 0) return;
  if (smem > 48 * 1024) cuda_util::set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // once per device
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cuda_util::check(cudaLaunchKernelEx(&cfg, kern, prm), name);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

// Which element-wise stages fold into the chunk kernels; decided before the scratch is sized (qk_inline
// leaves qn / kn out of it).
void choose_fusions(Params& prm, DeltaBwdKernels kernels) {
  // the v2 element-wise kernels use vector loads / stores of q, k, dq, dk (K / 32 elements per lane); q, k
  // (and v, g) are 16-byte aligned by the front door's require_aligned16, the outputs may not be
  prm.qk_v2 = kernels != DeltaBwdKernels::scalar_qk && aligned16(prm.dq) && aligned16(prm.dk);
  const bool k256 = prm.K == 256;
  const bool simt = kernels == DeltaBwdKernels::simt && prm.K <= 128;
  // post_qk's work moves into grad_k_v2's tail where one value head owns each q/k head (no GVA sum) and
  // post_qk_v2 would run; not with the SIMT chunk kernels. At K = 256 the CTA pair swaps its row dots (PairRowDots).
  prm.fuse_qk = prm.G == 1 && prm.qk_v2 && !simt;
  // and prep_qk's into chunk_prep_v2 and grad_k_v2 where q and k are bf16 (their 16-byte row pieces). At K = 256
  // chunk_prep_v2 normalises whole rows and writes rq / rk; grad_k_v2's halves and post_qk_v2 scale the raw rows by
  // them (post_qk_v2 only: the old post_qk reads prep_qk's rows)
  prm.qk_inline = (prm.fuse_qk || (k256 && prm.qk_v2)) && prm.qk_t == 2;
  // post_gate's work moves there too when the gate is given (dg is the reverse cumsum itself; dbeta's
  // sigmoid backward from beta after the sigmoid) and no dA_log / ddt_bias partials are wanted
  prm.fuse_gate = prm.gate_mode == kGateGiven && !prm.dA_log && !prm.ddt && !simt &&
                  (!prm.kda || prm.dg_t == 1 || prm.dg_t == 2);
}

template <int K>
void run_pipeline(const Params& prm, int total_chunks, cudaStream_t st, DeltaBwdKernels kernels) {
  using S = SmemSize<K>;
  const dim3 chunk_grid(static_cast<unsigned>(total_chunks), static_cast<unsigned>(prm.HV));
  const dim3 seq_grid(static_cast<unsigned>(static_cast<i64>(prm.N) * prm.HV * prm.nvt));
  const auto warps = [](i64 n) { return dim3(static_cast<unsigned>((n + 7) / 8)); };
  // the simt variant declines K = 256 (variants.cpp), whose chunk kernels exist only as grad_v4 / grad_k_v2
  const bool qk_v2 = prm.qk_v2 != 0, simt = K <= 128 && kernels == DeltaBwdKernels::simt;
  constexpr unsigned kStateCl = StateSlice<K>::CL;  // CTAs per state block (2 at K = 256: the channel halves)
  const dim3 state_grid(seq_grid.x * kStateCl);
  if (!prm.qk_inline) {
    if (qk_v2)
      launch(prep_qk_v2_kernel<K>, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd prep_qk");
    else
      launch(prep_qk_kernel, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd prep_qk");
  }
  // chunk_prep_v2 (two CTAs per SM, fragments built in registers, 3xTF32 merges): on the H200 2.74 ms
  // against the first tensor-core chunk_prep's 6.98 ms at KDA B1_T8192_H96_D128 and 0.109 against the
  // SIMT kernel's 0.351 ms at B8_T1024_H8_D64 (docs/kernels/chunk_delta_bwd.md).
  // two CTAs per SM need the whole carveout as shared memory (a hint; the default may pick less)
  cuda_util::set_func_attribute(chunk_prep_v2_kernel<K>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared, "delta_bwd chunk_prep carveout");
  launch(chunk_prep_v2_kernel<K>, chunk_grid, kNT, prep_v2_smem<K>(), st, prm, "delta_bwd chunk_prep");
  // The two state passes are independent (C reads chunk_prep's images and dO, not B's H_n or v_new):
  // C on a side stream next to B, so that their CTAs (one per SM, 192 each at B1_T8192_H96_D128: two
  // waves apiece) fill the SMs together. C first: its CTAs run longer.
  const cudaStream_t side = cuda_util::fork_side_stream(st);
  try {
    launch_clusters(state_bwd_wg_kernel<K>, state_grid, 256, kStateBwdWgSmem<K>, side, prm, "delta_bwd state_bwd_wg", kStateCl);
    launch_clusters(state_fwd_wg_kernel<K>, state_grid, 256, kStateFwdWgSmem<K>, st, prm, "delta_bwd state_fwd_wg", kStateCl);
  } catch (...) {
    cuda_util::join_side_stream(st, side);  // the scratch is freed on st: nothing may still use it on side
    throw;
  }
  cuda_util::join_side_stream(st, side);
  // grad_v4 (K halves, bf16 planes by cp.async; two CTAs per SM with bf16 inputs, one with others: Gen) where dO
  // and dv are 16-byte aligned (v is, above); else grad_v (every operand through registers as hi + lo planes).
  // (K = 256: dO and dv are 16-byte aligned, backward() refuses them otherwise)
  if (K <= 128 && (simt || !aligned16(prm.d_o) || !aligned16(prm.dv))) {
    if constexpr (K <= 128) launch(grad_v_kernel<K>, chunk_grid, kNT, S::D1, st, prm, "delta_bwd grad_v");
  } else {
    const auto run = [&](auto kernel, size_t smem) {
      // two CTAs per SM need the whole carveout as shared memory (a hint)
      cuda_util::set_func_attribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared,
                                    "delta_bwd grad_v carveout");
      launch(kernel, dim3(grad_v4_parts<K>() * chunk_grid.x, chunk_grid.y), kNT, smem, st, prm, "delta_bwd grad_v");
    };
    if (prm.h_lo) run(grad_v4_kernel<K, true>, grad_v4_smem<K, true>());
    else run(grad_v4_kernel<K, false>, grad_v4_smem<K, false>());
  }
  constexpr unsigned kGradKCl = GradKV2Smem<K>::kPair ? 2 : 1;  // CTA pairs over the channel halves at K = 256
  const auto run_grad_k = [&](auto kernel) {
    launch_clusters(kernel, dim3(kGradKCl * chunk_grid.x, chunk_grid.y), kNT, grad_k_v2_smem<K>(), st, prm, "delta_bwd grad_k",
                    kGradKCl);
  };
  if (simt) {
    if constexpr (K <= 128) launch(grad_k_kernel<K>, chunk_grid, kNT, S::D2, st, prm, "delta_bwd grad_k");
  } else if (!prm.kda) {
    run_grad_k(grad_k_v2_kernel<K, TailTcScalarGate>);
  } else {
    // KDA: the reference-row tail on tensor cores for every chunk under safe_gate, else for the chunks whose gates
    // chunk_prep_v2 found in range, and the exact SIMT tail for the others on a persistent grid (prm.tail_exact)
    run_grad_k(grad_k_v2_kernel<K, TailTcRefRows>);
    if (prm.tail_exact) {
      // one CTA per SM (its shared memory): as many CTAs (pairs at K = 256) as are resident at once
      const int units = std::max(1, std::min(cuda_util::sm_count() / static_cast<int>(kGradKCl), prm.tail_items));
      launch_clusters(grad_k_v2_exact_kernel<K>, dim3(kGradKCl * static_cast<unsigned>(units)), kNT, grad_k_v2_smem<K>(), st,
                      prm, "delta_bwd grad_k exact", kGradKCl);
    }
  }
  if (!prm.fuse_qk) {  // else done by grad_k_v2
    if (qk_v2)
      launch(post_qk_v2_kernel<K>, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd post_qk");
    else
      launch(post_qk_kernel, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd post_qk");
  }
  if (!prm.fuse_gate) launch(post_gate_kernel, warps(prm.R * prm.HV), 256, 0, st, prm, "delta_bwd post_gate");
  if (prm.dA_log || prm.ddt) {
    launch(param_partial_kernel, dim3(static_cast<unsigned>(prm.param_parts), static_cast<unsigned>(prm.HV)), 256, 0, st, prm,
           "delta_bwd param_partial");
    launch(param_finish_kernel, dim3(static_cast<unsigned>(prm.HV)), 256, 0, st, prm, "delta_bwd param_finish");
  }
}

int code(DType d) { return static_cast<int>(d); }

void require_float(const char* name, const TensorView& t) {
  if (!is_floating(t.dtype))
    throw_unsupported(name, std::string("dtype ") + std::string(dtype_name(t.dtype)) + " on the cuda backend",
                      "a floating dtype");
  if (!t.is_contiguous()) throw_unsupported(name, "a non-contiguous tensor on the cuda backend", "contiguous tensors");
}

RunInfo backward(const Problem& p, const DeltaRuleArgs& a, const AttentionGradInputs& gin, const DeltaRuleGrads& gr,
                 const ExecOptions& opts, DeltaBwdKernels kernels, bool kda, std::optional<double> lb, bool safe, const char* op) {
  if (p.K != 64 && p.K != 128 && p.K != 256)
    throw_unsupported("q", std::string("head dim K = ") + std::to_string(p.K) + " for the cuda " + op + " backward",
                      "K in {64, 128, 256}");
  if (p.V % kVT != 0 || p.V > 256)
    throw_unsupported("v", std::string("head dim V = ") + std::to_string(p.V) + " for the cuda " + op + " backward",
                      "V in {64, 128, 192, 256}");
  for (const auto& [n, t] : {std::pair<const char*, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g},
                             {"beta", &a.beta}, {"do", &gin.d_o}, {"dq", &gr.dq}, {"dk", &gr.dk}, {"dv", &gr.dv},
                             {"dg", &gr.dg}, {"dbeta", &gr.dbeta}})
    require_float(n, *t);
  for (const auto& [n, t] : {std::pair<const char*, const std::optional<TensorView>*>{"initial_state", &a.initial_state},
                             {"dht", &gin.d_final_state}, {"d_initial_state", &gr.d_initial_state}, {"A_log", &a.A_log},
                             {"dt_bias", &a.dt_bias}, {"d_A_log", &gr.d_A_log}, {"d_dt_bias", &gr.d_dt_bias}})
    if (*t) require_float(n, **t);
  for (const auto& [n, t] : {std::pair<const char*, const std::optional<TensorView>*>{"initial_state", &a.initial_state},
                             {"A_log", &a.A_log}, {"dt_bias", &a.dt_bias}})
    if (*t && (*t)->dtype != DType::f32)
      throw_unsupported(n, std::string("dtype ") + std::string(dtype_name((*t)->dtype)) + " on the cuda backend", "float32");
  if (gr.d_initial_state && gr.d_initial_state->dtype != DType::f32)
    throw_unsupported("d_initial_state", "a non-float32 tensor", "float32");
  if (gr.d_A_log && gr.d_A_log->dtype != DType::f32) throw_unsupported("d_A_log", "a non-float32 tensor", "float32");
  if (gr.d_dt_bias && gr.d_dt_bias->dtype != DType::f32) throw_unsupported("d_dt_bias", "a non-float32 tensor", "float32");
  // chunk_prep_v2 loads v as vectors, and the forward took these inputs under the same rule; dO and the
  // gradients have scalar fallbacks (grad_v, prep_qk / post_qk) where they are not aligned.
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}}, std::string(" (the CUDA ") + op + " backward)");
  // K = 256 has no scalar-fallback grad_v: dO and dv by 16-byte pieces (grad_v4)
  if (p.K == 256) require_aligned16({{"do", &gin.d_o}, {"dv", &gr.dv}}, std::string(" (the CUDA ") + op + " backward at K = 256)");

  auto st = static_cast<cudaStream_t>(opts.stream);
  Params prm{};
  prm.q = a.q.data;
  prm.k = a.k.data;
  prm.v = a.v.data;
  prm.g = a.g.data;
  prm.beta = a.beta.data;
  prm.A_log = a.A_log ? a.A_log->ptr<const float>() : nullptr;
  prm.dt_bias = a.dt_bias ? a.dt_bias->ptr<const float>() : nullptr;
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.d_o = gin.d_o.data;
  prm.dht = gin.d_final_state ? gin.d_final_state->data : nullptr;
  prm.qk_t = code(a.q.dtype);
  if (a.k.dtype != a.q.dtype) throw_unsupported("k", "a dtype different from q's", "the dtype of q");
  prm.v_t = code(a.v.dtype);
  prm.g_t = code(a.g.dtype);
  prm.beta_t = code(a.beta.dtype);
  prm.do_t = code(gin.d_o.dtype);
  prm.dht_t = gin.d_final_state ? code(gin.d_final_state->dtype) : 1;
  prm.dq = gr.dq.data;
  prm.dk = gr.dk.data;
  prm.dv = gr.dv.data;
  prm.dg = gr.dg.data;
  prm.dbeta = gr.dbeta.data;
  prm.dh0 = gr.d_initial_state ? gr.d_initial_state->ptr<float>() : nullptr;
  prm.dA_log = gr.d_A_log ? gr.d_A_log->ptr<float>() : nullptr;
  prm.ddt = gr.d_dt_bias ? gr.d_dt_bias->ptr<float>() : nullptr;
  if (gr.dk.dtype != gr.dq.dtype) throw_unsupported("dk", "a dtype different from dq's", "the dtype of dq");
  prm.dq_t = code(gr.dq.dtype);
  prm.dv_t = code(gr.dv.dtype);
  prm.dg_t = code(gr.dg.dtype);
  prm.dbeta_t = code(gr.dbeta.dtype);
  prm.N = static_cast<int>(p.N);
  prm.H = static_cast<int>(p.H);
  prm.HV = static_cast<int>(p.HV);
  prm.G = static_cast<int>(p.group());
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.Kg = kda ? prm.K : 1;
  prm.nvt = prm.V / kVT;
  prm.R = p.B * p.T;
  prm.scale = static_cast<float>(p.scale);
  prm.kda = kda;
  prm.gate_mode = a.use_gate_in_kernel ? ((kda && lb) ? kGateLowerBound : kGateSoftplus) : kGateGiven;
  prm.has_A_log = a.A_log.has_value();
  prm.lower_bound = lb ? static_cast<float>(*lb) : 0.f;
  prm.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  prm.beta_mult = a.allow_neg_eigval ? 2.f : 1.f;
  prm.l2norm = a.use_qk_l2norm_in_kernel;
  prm.safe = kda && safe;

  // sequences: dense inputs upload nothing (the kernels derive each sequence from T, as the forward's);
  // varlen inputs upload their descriptors, and the kernels find a chunk's sequence by binary search
  const cuda_util::DeviceSeqs seqs = cuda_util::upload_sequences(p, st);
  const int total_chunks = seqs.total_chunks;

  // scratch (fp32 slices and the state passes' bf16 planes), carved from one allocation
  const i64 R = prm.R, H = p.H, HV = p.HV, K = p.K, V = p.V, Kg = prm.Kg, NT = total_chunks;
  // H_n as one bf16 plane where every input grad_v4 multiplies is bf16 (q / k, v, dO), else hi + lo. h_lo == 0 also
  // selects grad_v4<K, false>, which reads dO and v as bf16 by cp.async: the two must keep the same rule.
  const i64 h_lo = (prm.qk_t == 2 && prm.v_t == 2 && prm.do_t == 2) ? 0 : 1;
  prm.h_lo = static_cast<int>(h_lo);
  prm.plane_kv = NT * HV * K * V;
  prm.plane_tok = R * HV * V;
  const i64 img_bytes = K == 64 ? sizeof(ChunkImage<64>) : K == 128 ? sizeof(ChunkImage<128>) : sizeof(ChunkImage<256>);
  const i64 img_floats = NT * HV * img_bytes / 4;
  choose_fusions(prm, kernels);
  const i64 qkn = prm.qk_inline ? 0 : R * H * K;
  // Each slice in floats with the stages that use it (run_pipeline's order; B and C share a stage, they run side
  // by side): slices that never live together share bytes (plan_scratch), which takes the peak from the sum of
  // all slices to the largest stage's live set.
  enum Stage { kPrepQk, kChunkPrep, kStatePasses, kGradV, kGradK, kPostQk, kPostGate, kParamReduce };
  struct Slice {
    i64 floats;
    Stage first, last;
    float** slot;
  };
  float *img = nullptr, *Hs = nullptr, *dHs = nullptr, *vnb = nullptr, *dvn = nullptr, *tail_exact = nullptr,
        *param_part = nullptr;
  prm.param_parts = static_cast<int>(std::clamp<i64>((R + kParamRowsPerPart - 1) / kParamRowsPerPart, 1, kParamMaxParts));
  const Slice slices[] = {
      {qkn, kPrepQk, kPostQk, &prm.qn}, {qkn, kPrepQk, kPostQk, &prm.kn},          // l2-normalised rows
      {R * H, kPrepQk, kPostQk, &prm.rq}, {R * H, kPrepQk, kPostQk, &prm.rk},      // their rstd
      {R * HV * Kg, kChunkPrep, kGradK, &prm.b}, {R * HV, kChunkPrep, kGradK, &prm.bt},
      {R * HV * kC, kChunkPrep, kGradK, &prm.Tinv},
      {R * HV * V, kChunkPrep, kStatePasses, &prm.vn}, {img_floats, kChunkPrep, kStatePasses, &img},
      {(1 + h_lo) * NT * HV * K * V / 2, kStatePasses, kGradV, &Hs}, {NT * HV * K * V, kStatePasses, kGradV, &dHs},  // bf16 planes
      {R * HV * V, kStatePasses, kGradV, &vnb}, {R * HV * V, kStatePasses, kGradV, &dvn},                          // bf16 hi + lo
      {R * HV * K, kGradV, kPostQk, &prm.dqe}, {R * HV * K, kGradV, kPostQk, &prm.dke},
      {R * HV * K, kGradV, kGradK, &prm.dw}, {R * HV * kC, kGradV, kGradK, &prm.dAqk}, {R * HV * kC, kGradV, kGradK, &prm.dTv},
      {NT * HV * K, kGradV, kGradK, &prm.hd}, {R * HV, kGradV, kPostGate, &prm.dbp},
      {R * HV * Kg, kGradK, kParamReduce, &prm.dgv}, {R * HV, kPostGate, kParamReduce, &prm.dAc},
      {prm.kda && !prm.safe ? NT * HV : 0, kChunkPrep, kGradK, &tail_exact},  // int flags, 4 bytes like a float
      {prm.dA_log || prm.ddt ? 2 * HV * prm.param_parts * (Kg + 1) : 0, kParamReduce, kParamReduce, &param_part}};  // doubles
  std::vector<ScratchSlice> plan_in;
  for (const Slice& sl : slices) plan_in.push_back({sl.floats * 4, sl.first, sl.last});
  const ScratchPlan plan = plan_scratch(plan_in, 256);  // 256-byte aligned slices
  // From lina's pool, which keeps it mapped between calls (the default pool would unmap it at every sync).
  float* scratch = cuda_util::workspace_alloc_as<float>(static_cast<size_t>(plan.total_bytes / 4), st, "delta bwd scratch");
  for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); ++i) *slices[i].slot = scratch + plan.offsets[i] / 4;
  prm.img = img;  // 256-byte aligned, as the bulk copies need (16)
  prm.Hs = reinterpret_cast<bf16*>(Hs);
  prm.dHs = reinterpret_cast<bf16*>(dHs);
  prm.vnb = reinterpret_cast<bf16*>(vnb);
  prm.dvn = reinterpret_cast<bf16*>(dvn);
  prm.param_part = reinterpret_cast<double*>(param_part);  // 256-byte aligned
  if (prm.kda && !prm.safe) {  // chunk_prep_v2 writes every chunk's flag before grad_k_v2 reads it
    if (NT * HV > std::numeric_limits<int>::max())  // grad_k_v2_exact_kernel indexes the flags with int
      throw_unsupported("q", std::to_string(NT) + " chunks x " + std::to_string(HV) +
                                 " value heads without safe_gate on the cuda chunk_kda backward",
                        "at most 2^31 - 1 (chunk, value head) items");
    prm.tail_exact = reinterpret_cast<int*>(tail_exact);
    prm.tail_items = static_cast<int>(NT * HV);
  }
  prm.seqs = seqs.view;
  try {
    if (p.K == 64) run_pipeline<64>(prm, total_chunks, st, kernels);
    else if (p.K == 128) run_pipeline<128>(prm, total_chunks, st, kernels);
    else run_pipeline<256>(prm, total_chunks, st, kernels);
  } catch (...) {
    try {  // best effort on the error path; the launch error is the one to report
      cuda_util::workspace_free(scratch, st, "delta bwd scratch");
      cuda_util::workspace_free(seqs.ptr, st, "delta bwd sequence table");
    } catch (...) {
    }
    throw;
  }
  cuda_util::workspace_free(scratch, st, "delta bwd scratch");
  // The table comes from lina's pool like the scratch (upload_sequences), which under PyTorch is torch's caching
  // allocator: cudaFreeAsync of it is an invalid argument.
  cuda_util::workspace_free(seqs.ptr, st, "delta bwd sequence table");
  const std::string ks = std::to_string(p.K);
  return RunInfo{"cuda",
                 {"lina::delta_bwd prep_qk", "lina::delta_bwd chunk_prep<" + ks + ">", "lina::delta_bwd state_fwd<" + ks + ">",
                  "lina::delta_bwd state_bwd<" + ks + ">", "lina::delta_bwd grad_v<" + ks + ">",
                  "lina::delta_bwd grad_k<" + ks + ">", "lina::delta_bwd post_qk", "lina::delta_bwd post_gate"}};
}

}  // namespace

RunInfo kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels) {
  // The middle-reference diagonal blocks of chunk_prep_v2 need every g >= -5 (the forward's rule).
  const bool safe = a.safe_gate && a.lower_bound && *a.lower_bound >= -5.0;
  return backward(p, a, in, g, opts, kernels, true, a.use_gate_in_kernel ? a.lower_bound : std::nullopt, safe, "chunk_kda");
}

RunInfo gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels) {
  return backward(p, a, in, g, opts, kernels, false, std::nullopt, false, "chunk_gdn");
}

}  // namespace lina::detail::cuda
