// Stage A of the chunk_kda / chunk_gdn backward, second tensor-core version: chunk_prep_v2_kernel<K>
// (docs/kernels/chunk_delta_bwd.md, "chunk_prep v2").
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
//
// Outputs: fp32 b, bt, Tinv and u = Tinv (v beta) (in p.vn) for the later stages, and the state passes'
// operand images (ChunkImage: w, kg = k e^(bL - b), qg = scale q e^b, Aqk as bf16 hi + lo SW128 tiles,
// e^bL), every row written, padded rows as zeros. How, taken from the forward's prep:
//  - two CTAs per SM (107 KB shared memory at K = 128, <= 128 registers): the fp32 q tile's space is
//    reused for L and X, k's for the k e^b beta planes, b's for the v planes;
//  - every load of the chunk is in flight at once at the top (q, k by cp.async from prep_qk's fp32 rows, or
//    with qk_inline the bf16 rows into registers, normalised here (InlineQkRows; rq / rk to HBM for grad_k and
//    post_qk); raw gate and beta
//    into registers), the first v tile is loaded into registers during the inverse;
//  - gate cumsum over all 256 threads (column segments, offsets by shuffles);
//  - Aqk and L in ONE round, no operand tiles in shared memory: each warp builds its mma fragments in
//    registers from the fp32 q / k / b tiles (hi + lo bf16 split, as before) for a job of the
//    forward's job table (off-diagonal tiles of a row block through its first row; diagonal blocks
//    through their middle row when safe_gate (g >= -5) or the chunk's 16-row gate sums are >= -40
//    (gate_range.cuh), else exact exps on all threads);
//    GDN: plain q k^T on tensor cores for every block, the scalar decay applied in the epilogue;
//  - (I+L)^-1: diagonal 16x16 blocks by forward substitution in registers (warps 0-3), block merges on
//    tensor cores in 3xTF32 (hi + lo tf32 operands, lo x lo dropped: ~21 bits, close to the fp32
//    SIMT merges it replaces).
// Gate differences exponentiated: only non-positive ones except the middle-row diagonal blocks, whose
// factors are bounded by e^40 (safe_gate: 8 gates >= -5; or a block's gate sum >= -40) (docs/math.md section 5).
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/chunk_image.cuh"
#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/qk_rows.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/delta/cuda/gate_range.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

template <int K>
struct PrepV2Smem {
  static constexpr int FP = K + 8;  // fp32 pitch: the (g, t) float2 fragment loads hit distinct banks
  union alignas(16) R1 {
    float q[kC][FP];  // normalised q (Aqk only)
    struct {
      float L[kC][72];  // strict-lower L, times beta_r
      float X[kC][72];  // (I+L)^-1 in fp32; its upper blocks are merge scratch
    } lx;
    bf16 xs[2][kC][72];  // X as hi / lo planes, over L (dead after the inverse)
  } r1;
  union alignas(16) R2 {
    float k[kC][FP];          // normalised k
    bf16 kbe[2][kC][K + 8];  // k e^b beta as hi / lo planes (written once k and b are read)
  } r2;
  union alignas(16) R3 {
    float b[kC][FP];     // chunk-local gate cumsum (KDA)
    bf16 v[2][kC][72];  // v beta, one 64-column tile, hi / lo
  } r3;
  float beta[kC];
  float bs[kC];  // GDN: scalar cumsum
};
static_assert(sizeof(PrepV2Smem<128>) <= 113 * 1024, "chunk_prep_v2<128>: two CTAs per SM");
static_assert(sizeof(PrepV2Smem<64>) <= 113 * 1024, "chunk_prep_v2<64>: two CTAs per SM");
static_assert(sizeof(PrepV2Smem<256>) <= 227 * 1024, "chunk_prep_v2<256>: one CTA per SM");
static_assert(sizeof(PrepV2Smem<64>::R3) >= kC * 64 * 4 && sizeof(PrepV2Smem<128>::R3) >= kC * 128 * 4 &&
                  sizeof(PrepV2Smem<256>::R3) >= kC * 256 * 4,
              "chunk_prep_v2: b's space holds a raw f32 gate tile");

template <int K>
constexpr size_t prep_v2_smem() {
  return sizeof(PrepV2Smem<K>);
}

// acc (16 x 16 as two n8 tiles) += A (16 x 16) B (16 x 16), fp32 row-major tiles with pitch P, as
// 3xTF32: a = a_hi + a_lo (tf32 each), products a_lo b_hi + a_hi b_lo + a_hi b_hi.
template <int P>
__device__ __forceinline__ void blk_mma_3tf32(float (&acc)[2][4], const float* A, const float* B, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const float af[4] = {A[g * P + 8 * ks + t], A[(g + 8) * P + 8 * ks + t], A[g * P + 8 * ks + t + 4],
                         A[(g + 8) * P + 8 * ks + t + 4]};
    std::uint32_t ah[4], al[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      ah[e] = cuda_util::to_tf32(af[e]);
      al[e] = cuda_util::to_tf32(af[e] - __uint_as_float(ah[e]));
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const float b0 = B[(8 * ks + t) * P + 8 * nt + g], b1 = B[(8 * ks + t + 4) * P + 8 * nt + g];
      const std::uint32_t bh0 = cuda_util::to_tf32(b0), bh1 = cuda_util::to_tf32(b1);
      const std::uint32_t bl0 = cuda_util::to_tf32(b0 - __uint_as_float(bh0)), bl1 = cuda_util::to_tf32(b1 - __uint_as_float(bh1));
      cuda_util::mma_tf32_1688(acc[nt], al, bh0, bh1);
      cuda_util::mma_tf32_1688(acc[nt], ah, bl0, bl1);
      cuda_util::mma_tf32_1688(acc[nt], ah, bh0, bh1);
    }
  }
}

template <int P>
__device__ __forceinline__ void blk_store_f32(float* D, const float (&acc)[2][4], float sign, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    st2(D + g * P + 8 * nt + 2 * t, sign * acc[nt][0], sign * acc[nt][1]);
    st2(D + (g + 8) * P + 8 * nt + 2 * t, sign * acc[nt][2], sign * acc[nt][3]);
  }
}

// N raw values src[base + i * stride] (i < n; 0 past n) into registers; the dtype switch is taken
// once, so all N loads are in flight together.
template <int N>
__device__ __forceinline__ void load_strided(float (&x)[N], const void* src, int dtype, i64 base, i64 stride, int n) {
  if (dtype == 2) {
    const bf16* s = static_cast<const bf16*>(src);
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = i < n ? __bfloat162float(s[base + i * stride]) : 0.f;
  } else if (dtype == 1) {
    const float* s = static_cast<const float*>(src);
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = i < n ? s[base + i * stride] : 0.f;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = i < n ? load_as_float(src, dtype, base + i * stride) : 0.f;
  }
}

// Two CTAs per SM up to K = 128; one at K = 256 (its fp32 [64][K + 8] tiles take ~200 KB).
template <int K>
__global__ void __launch_bounds__(kNT, K == 256 ? 1 : 2) chunk_prep_v2_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<PrepV2Smem<K>*>(smem_raw);
  constexpr int KB = K + 8;
  const int hv = blockIdx.y, h = hv / p.G, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const ChunkInfo ci = chunk_info(p, blockIdx.x);
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn;
  ChunkImage<K>& img = chunk_image<K>(p, ci.gidx, hv);

  // ---- loads: q, k (fp32 scratch rows, cp.async, zero-filled past Cn; or qk_inline: the bf16 rows into
  // registers, normalised into the tiles below), beta, raw gate
  // K = 256 too, although one CTA per SM leaves the row pieces' latency and the norms' shuffles exposed (chunk_prep
  // 2.59 -> 2.83 ms at KDA B8_T2048_H32_D256, against prep_qk's 0.42 ms saved). Measured and slower: the bf16 rows by
  // cp.async into the upper half of each fp32 row, expanded and normalised in place after the wait (2.90 ms a row at a
  // time, 3.17 with a warp's eight rows unrolled).
  InlineQkRows<K> qkr;
  if (p.qk_inline) {
    qkr.issue(p, t0, Cn, h, tid);
  } else {
    constexpr int QV = K / 4;  // 16-byte pieces per row
#pragma unroll 4
    for (int i = tid; i < kC * QV; i += kNT) {
      const int r = i / QV, c4 = 4 * (i % QV);
      const i64 src = ((t0 + min(r, Cn - 1)) * p.H + h) * K + c4;
      cuda_util::cp_async16(&s.r1.q[r][c4], p.qn + src, r < Cn);
      cuda_util::cp_async16(&s.r2.k[r][c4], p.kn + src, r < Cn);
    }
  }
  // KDA's raw gate rows (f32 / bf16 / f16: K * 2 or 4 bytes each, 16-byte aligned by the front door)
  // staged into b's space by cp.async with q and k, not loaded by 32 strided scalar loads per thread
  const bool g_staged = p.kda && p.g_t != 0;
  char* const g_raw = reinterpret_cast<char*>(&s.r3.b[0][0]);
  if (g_staged) {
    const int rb = K * (p.g_t == 1 ? 4 : 2), pieces = rb / 16;
#pragma unroll 1
    for (int i = tid; i < kC * pieces; i += kNT) {
      const int r = i / pieces, o = 16 * (i % pieces);
      const char* src = static_cast<const char*>(p.g) + ((t0 + min(r, Cn - 1)) * p.HV + hv) * rb + o;
      cuda_util::cp_async16(g_raw + r * rb + o, src, r < Cn);
    }
  }
  cuda_util::cp_async_commit();
  float bt = 0.f;
  if (tid < kC && tid < Cn) bt = load_as_float(p.beta, p.beta_t, (t0 + tid) * p.HV + hv);
  // rq / rk once per q/k head: at K = 256 the G value heads of a GVA group each normalise the same rows (K <= 128
  // inlines only where G = 1)
  if (p.qk_inline) qkr.store(p, s.r1.q, s.r2.k, t0, Cn, h, tid, K < 256 || hv % p.G == 0);  // read after the barrier below
  const float decay_a = (p.gate_mode != kGateGiven && p.has_A_log) ? __expf(p.A_log[hv]) : 1.f;
  bool in_range = true;  // KDA: this thread's 16-row blocks of the gate cumsum within gate_range.cuh's floor
  if (p.kda) {
    // column c = tid / NS in NS row segments of RR rows held by adjacent lanes
    constexpr int NS = kNT / K, RR = kC / NS;
    static_assert(NS * K == kNT && (NS & (NS - 1)) == 0, "cumsum thread mapping");
    const int c = tid / NS, seg = tid % NS, r0 = seg * RR;
    float x[RR];
    if (g_staged) {  // from shared memory (generic loads, the one call site of the global path)
      cuda_util::cp_async_wait_all();
      __syncthreads();
      load_strided<RR>(x, g_raw, p.g_t, static_cast<i64>(r0) * K + c, K, Cn - r0);
      __syncthreads();  // every raw row is read before b overwrites them
    } else {
      load_strided<RR>(x, p.g, p.g_t, ((t0 + r0) * p.HV + hv) * p.Kg + c, static_cast<i64>(p.HV) * p.Kg, Cn - r0);
    }
    const float bias = (p.gate_mode != kGateGiven && p.dt_bias) ? p.dt_bias[hv * p.Kg + c] : 0.f;
    // the gate form is chosen once, outside the unrolled rows: inside them, every row's given-gate add sat
    // between the softplus and sigmoid forms' code, so the given gate's 32 adds spanned ~44 KB of
    // instructions (ncu: 14 % of chunk_prep's warp samples stalled on instruction fetch there)
    float cum = 0.f;
    if (p.gate_mode == kGateGiven) {
#pragma unroll
      for (int i = 0; i < RR; ++i) {
        cum += x[i];  // padded rows were loaded as 0
        x[i] = cum;
      }
    } else {
#pragma unroll
      for (int i = 0; i < RR; ++i) {
        float a = 0.f;  // padded rows add 0
        if (r0 + i < Cn)
          a = p.gate_mode == kGateSoftplus ? -decay_a * softplusf_(x[i] + bias) : p.lower_bound * sigmoidf_(decay_a * (x[i] + bias));
        cum += a;
        x[i] = cum;
      }
    }
    in_range = block_sums_at_least(x, kBlockGateSumFloor);
    float off = 0.f;  // the earlier segments' totals, left to right
#pragma unroll
    for (int q = 0; q < NS - 1; ++q) {
      const float y = __shfl_sync(0xffffffffu, cum, (lane & ~(NS - 1)) + q);
      if (q < seg) off += y;
    }
#pragma unroll
    for (int i = 0; i < RR; ++i) {
      s.r3.b[r0 + i][c] = x[i] + off;  // to HBM below, as float4 rows
    }
  } else if (warp == 1) {  // GDN scalar gate: lane owns rows 2 lane, 2 lane + 1; scan over lanes
    float x[2];
    load_strided<2>(x, p.g, p.g_t, (t0 + 2 * lane) * p.HV + hv, p.HV, Cn - 2 * lane);
    const float bias = (p.gate_mode != kGateGiven && p.dt_bias) ? p.dt_bias[hv] : 0.f;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (2 * lane + e >= Cn) x[e] = 0.f;
      else if (p.gate_mode == kGateSoftplus) x[e] = -decay_a * softplusf_(x[e] + bias);
    }
    float sc = x[0] + x[1];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, sc, o);
      if (lane >= o) sc += y;
    }
    const float b0 = sc - x[1];
    s.bs[2 * lane] = b0;
    s.bs[2 * lane + 1] = sc;
    if (2 * lane < Cn) p.b[(t0 + 2 * lane) * p.HV + hv] = b0;
    if (2 * lane + 1 < Cn) p.b[(t0 + 2 * lane + 1) * p.HV + hv] = sc;
  }
  if (tid < kC) {
    if (tid < Cn) {
      if (p.beta_sigmoid) bt = p.beta_mult * sigmoidf_(bt);
      p.bt[(t0 + tid) * p.HV + hv] = bt;
    }
    s.beta[tid] = bt;
  }
  cuda_util::cp_async_wait_all();
  const bool chunk_in_range = __syncthreads_and(in_range) != 0;

  // ---- Aqk (j <= r, times scale) and L (j < r, times beta_r), one round. Job table of the forward
  // prep: warp -> row block ib, diagonal?, n8 column tiles ntb .. ntb + nj - 1 (warps 0-7: ib3 off
  // 0-2, ib2 off 0-3, ib1 off 0-1, ib2 diag, ib3 off 3-5, ib0 diag, ib1 diag, ib3 diag; where the diagonal
  // blocks are mma jobs, ib2 off 0-2 and ib2 diag with its tile 3: move3 below).
  const bool kda = p.kda != 0;
  {  // one compact pass over the [64][K] tiles (a small loop body: this kernel's code is already large
     // enough to miss in the instruction cache): the state passes' images qg = scale q e^b and
     // kg = k e^(bL - b) (e^(non-positive) <= 1 by the clamp), e^bL, and KDA's b rows to HBM
    constexpr int Q4 = K / 4;
#pragma unroll 1
    for (int i = tid; i < kC * Q4; i += kNT) {
      const int r = i / Q4, c = 4 * (i % Q4);
      const float4 b = kda ? ld4(&s.r3.b[r][c]) : make_float4(s.bs[r], s.bs[r], s.bs[r], s.bs[r]);
      const float4 bl = kda ? ld4(&s.r3.b[Cn - 1][c]) : make_float4(s.bs[Cn - 1], s.bs[Cn - 1], s.bs[Cn - 1], s.bs[Cn - 1]);
      float4 qg = kZero4, kg = kZero4;
      if (r < Cn) {
        const float4 q = ld4(&s.r1.q[r][c]), k = ld4(&s.r2.k[r][c]);
        qg = make_float4(p.scale * q.x * __expf(b.x), p.scale * q.y * __expf(b.y), p.scale * q.z * __expf(b.z),
                         p.scale * q.w * __expf(b.w));
        kg = make_float4(k.x * __expf(fminf(bl.x - b.x, 0.f)), k.y * __expf(fminf(bl.y - b.y, 0.f)),
                         k.z * __expf(fminf(bl.z - b.z, 0.f)), k.w * __expf(fminf(bl.w - b.w, 0.f)));
        if (kda) *reinterpret_cast<float4*>(p.b + ((t0 + r) * p.HV + hv) * K + c) = b;
      }
      const int o = cuda_util::wgmma::sw128_blocked<kC>(r, c);
      tile_store4(img.qg, o, qg);
      tile_store4(img.kg, o, kg);
    }
    for (int c = tid; c < K; c += kNT) img.el[c] = __expf(kda ? s.r3.b[Cn - 1][c] : s.bs[Cn - 1]);
  }
  // KDA's diagonal blocks through their middle row under safe_gate or where this chunk's gates are in range
  // (CTA-uniform); grad_k_v2 takes the same form per chunk from tail_exact
  const bool diag_mma = !kda || p.safe || chunk_in_range;
  if (tid == 0 && p.tail_exact) p.tail_exact[static_cast<i64>(ci.gidx) * p.HV + hv] = diag_mma ? 0 : 1;
  const int ib = static_cast<int>((0x31032123u >> (4 * warp)) & 0xFu);
  const bool dia = ((0xE8u >> warp) & 1u) != 0u;
  // Where the diagonal blocks are mma jobs, row block 2's off-diagonal tile 3 moves from warp 1 to warp 3 (its
  // diagonal block, middle reference row 40: tile 3's key factors e^(b_40 - b_j), j >= 24, stay within e^80
  // under safe_gate and gate_range.cuh's check; GDN applies its decay in the epilogue): no warp has more than 3 tiles (warp 1 had 4)
  const bool move3 = diag_mma && (warp == 1 || warp == 3);
  const int ntb = dia ? (move3 ? 3 : 2 * ib) : (warp == 4 ? 3 : 0);
  const int nj = move3 ? 3 : dia ? 2 : (warp == 0 || warp == 4 ? 3 : 2 * ib);
  const bool job_mma = !dia || diag_mma;
  const int rA = 16 * ib + g;
  float accA[4][4], accL[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) accA[i][e] = accL[i][e] = 0.f;
  if (job_mma) {
    // KDA reference row: first row of the block (off-diagonal: every factor e^(<= 0)), middle row of
    // a diagonal block (safe_gate or gates in range: factors <= e^40).
    const int nref = dia ? 16 * ib + 8 : 16 * ib;
#pragma unroll 1
    for (int ks = 0; ks < K / 16; ++ks) {
      std::uint32_t qh[4], ql[4], kh[4], kl[4];
      float2 bn[2];
#pragma unroll
      for (int cs = 0; cs < 2; ++cs) {
        const int c = 16 * ks + 8 * cs + 2 * t;
        bn[cs] = kda ? ld2(&s.r3.b[nref][c]) : make_float2(0.f, 0.f);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int r = rA + 8 * hf;
          float2 qv = ld2(&s.r1.q[r][c]), kv = ld2(&s.r2.k[r][c]);
          if (kda) {
            const float2 br = ld2(&s.r3.b[r][c]);
            const float e0 = __expf(br.x - bn[cs].x), e1 = __expf(br.y - bn[cs].y);
            qv.x *= e0, qv.y *= e1, kv.x *= e0, kv.y *= e1;
          }
          cuda_util::pack_bf16_split(qv.x, qv.y, qh[hf + 2 * cs], ql[hf + 2 * cs]);
          cuda_util::pack_bf16_split(kv.x, kv.y, kh[hf + 2 * cs], kl[hf + 2 * cs]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (i >= nj) continue;
        const int j = 8 * (ntb + i) + g;
        std::uint32_t bh[2], bl[2];
#pragma unroll
        for (int cs = 0; cs < 2; ++cs) {
          const int c = 16 * ks + 8 * cs + 2 * t;
          float2 kv = ld2(&s.r2.k[j][c]);
          if (kda) {
            const float2 bj = ld2(&s.r3.b[j][c]);
            kv.x *= __expf(bn[cs].x - bj.x);
            kv.y *= __expf(bn[cs].y - bj.y);
          }
          cuda_util::pack_bf16_split(kv.x, kv.y, bh[cs], bl[cs]);
        }
        cuda_util::mma_bf16_16816_split(accA[i], qh, ql, bh[0], bh[1], bl[0], bl[1]);
        cuda_util::mma_bf16_16816_split(accL[i], kh, kl, bh[0], bh[1], bl[0], bl[1]);
      }
    }
    // epilogue: Aqk to HBM now; L (masked, times beta_r) stays in accL until q's space is free
    const float beta_r[2] = {s.beta[rA], s.beta[rA + 8]};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (i >= nj) continue;
      const int j = 8 * (ntb + i) + 2 * t;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = rA + 8 * hf;
        float a0 = accA[i][2 * hf], a1 = accA[i][2 * hf + 1], l0 = accL[i][2 * hf], l1 = accL[i][2 * hf + 1];
        if (!kda) {  // GDN: scalar decay e^(b_r - b_j) (j > r is masked below)
          const float e0 = __expf(s.bs[r] - s.bs[j]), e1 = __expf(s.bs[r] - s.bs[j + 1]);
          a0 *= e0, a1 *= e1, l0 *= e0, l1 *= e1;
        }
        a0 = (j <= r) ? p.scale * a0 : 0.f;
        a1 = (j + 1 <= r) ? p.scale * a1 : 0.f;
        accL[i][2 * hf] = (j < r) ? beta_r[hf] * l0 : 0.f;
        accL[i][2 * hf + 1] = (j + 1 < r) ? beta_r[hf] * l1 : 0.f;
        tile_store2(img.A, r, j, r < Cn ? a0 : 0.f, r < Cn ? a1 : 0.f);
      }
    }
  }
  // KDA, gates out of range without safe_gate: the diagonal blocks with exact exps on all threads (pair (tid / 16,
  // tid % 16) of each block; the channel order is rotated by j / 4 so the 16 key rows of a warp hit
  // distinct banks).
  float ldia[4] = {0.f, 0.f, 0.f, 0.f};
  if (!diag_mma) {
    const int rr = tid >> 4, jj = tid & 15, rot = jj >> 2;
#pragma unroll  // ldia stays in registers
    for (int bb = 0; bb < 4; ++bb) {
      const int r = 16 * bb + rr, j = 16 * bb + jj;
      float a = 0.f, l = 0.f;
      if (jj <= rr && r < Cn) {
#pragma unroll 8
        for (int c0 = 0; c0 < K; ++c0) {
          const int c = (c0 + rot) & (K - 1);
          const float e = __expf(s.r3.b[r][c] - s.r3.b[j][c]) * s.r2.k[j][c];
          a += s.r1.q[r][c] * e;
          l += s.r2.k[r][c] * e;
        }
        a *= p.scale;
        l = (jj < rr) ? l * s.beta[r] : 0.f;
      }
      ldia[bb] = l;
      const float an = __shfl_down_sync(0xffffffffu, a, 1);  // (r, j + 1): the next lane
      if (!(jj & 1)) tile_store2(img.A, r, j, a, an);
    }
  }
  // Aqk above the diagonal blocks is zero (state_bwd reads all 64 columns)
  for (int i = tid; i < kC * (kC / 4); i += kNT) {
    const int r = i >> 4, c4 = 4 * (i & 15);
    if (c4 >= 16 * ((r >> 4) + 1)) st_split4(img.A.hi, img.A.lo, cuda_util::wgmma::sw128_blocked<kC>(r, c4), kZero4);
  }
  __syncthreads();  // q is dead: L goes over it
  if (job_mma) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (i >= nj) continue;
      const int j = 8 * (ntb + i) + 2 * t;
      st2(&s.r1.lx.L[rA][j], accL[i][0], accL[i][1]);
      st2(&s.r1.lx.L[rA + 8][j], accL[i][2], accL[i][3]);
    }
  }
  if (!diag_mma) {
    const int rr = tid >> 4, jj = tid & 15;
#pragma unroll
    for (int bb = 0; bb < 4; ++bb) s.r1.lx.L[16 * bb + rr][16 * bb + jj] = ldia[bb];
  }
  __syncthreads();

  // ---- (I+L)^-1. The first v tile's loads go out now and land during the inverse; each later tile's
  // during the products of the one before (v tiles pass through registers: vr).
  constexpr int VR = kC * kVT / 4 / kNT;  // float4 of a v tile per thread
  float4 vr[VR];
  auto load_vt = [&](int vt) {
    load4_batch<VR>(vr, p.v, p.v_t, [&](int u) {
      const int i = tid + u * kNT, r = i / (kVT / 4), c = 4 * (i % (kVT / 4));
      return r < Cn ? ((t0 + r) * p.HV + hv) * p.V + vt * kVT + c : i64{-1};
    });
  };
  auto store_vt = [&]() {  // v beta as hi + lo planes into b's space
#pragma unroll
    for (int u = 0; u < VR; ++u) {
      const int i = tid + u * kNT, r = i / (kVT / 4), c = 4 * (i % (kVT / 4));
      const float b = s.beta[r];
      std::uint32_t h0, l0, h1, l1;
      cuda_util::pack_bf16_split(vr[u].x * b, vr[u].y * b, h0, l0);
      cuda_util::pack_bf16_split(vr[u].z * b, vr[u].w * b, h1, l1);
      *reinterpret_cast<uint2*>(&s.r3.v[0][r][c]) = make_uint2(h0, h1);
      *reinterpret_cast<uint2*>(&s.r3.v[1][r][c]) = make_uint2(l0, l1);
    }
  };
  load_vt(0);
  if (warp < 4) {  // diagonal block `warp` by forward substitution, column lane % 16, in registers
    const int c = lane & 15, o = 16 * warp;
    float xs[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float acc = (i == c) ? 1.f : 0.f;
#pragma unroll
      for (int j = 0; j < i; ++j) acc -= s.r1.lx.L[o + i][o + j] * xs[j];
      xs[i] = acc;
    }
    if (lane < 16) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s.r1.lx.X[o + i][o + c] = xs[i];
    }
  }
  __syncthreads();
  // merges X_ij = -X_ii sum_{m=j}^{i-1} L_im X_mj, diagonal by diagonal; warp i of level d writes its
  // sum into the upper block (j, i) (scratch, masked on output)
#pragma unroll 1
  for (int d = 1; d < 4; ++d) {
    if (warp >= d && warp < 4) {
      const int i = warp, jc = warp - d;
      float acc[2][4] = {};
      for (int m = jc; m < i; ++m) blk_mma_3tf32<72>(acc, &s.r1.lx.L[16 * i][16 * m], &s.r1.lx.X[16 * m][16 * jc], lane);
      blk_store_f32<72>(&s.r1.lx.X[16 * jc][16 * i], acc, 1.f, lane);
      __syncwarp();
      float acc2[2][4] = {};
      blk_mma_3tf32<72>(acc2, &s.r1.lx.X[16 * i][16 * i], &s.r1.lx.X[16 * jc][16 * i], lane);
      blk_store_f32<72>(&s.r1.lx.X[16 * i][16 * jc], acc2, -1.f, lane);
    }
    __syncthreads();
  }

  // ---- Tinv to HBM and as hi + lo planes (over L); k e^b beta into registers, then over k
  for (int i = tid; i < kC * kC / 2; i += kNT) {
    const int r = i >> 5, j = 2 * (i & 31);
    const bool up = (j >> 4) > (r >> 4);  // merge scratch: Tinv is zero there
    const float x0 = up ? 0.f : s.r1.lx.X[r][j], x1 = up ? 0.f : s.r1.lx.X[r][j + 1];
    if (r < Cn) st2(p.Tinv + ((t0 + r) * p.HV + hv) * kC + j, x0, x1);
    std::uint32_t hi, lo;
    cuda_util::pack_bf16_split(x0, x1, hi, lo);
    st_u32(&s.r1.xs[0][r][j], hi);
    st_u32(&s.r1.xs[1][r][j], lo);
  }
  constexpr int PK = kC * K / 2 / kNT;  // k e^b beta pairs per thread
  std::uint32_t kh[PK], kl[PK];
#pragma unroll
  for (int u = 0; u < PK; ++u) {
    const int i = tid + u * kNT, r = i / (K / 2), c = 2 * (i % (K / 2));
    const float2 kv = ld2(&s.r2.k[r][c]);
    const float2 bv = kda ? ld2(&s.r3.b[r][c]) : make_float2(s.bs[r], s.bs[r]);
    cuda_util::pack_bf16_split(kv.x * __expf(bv.x) * s.beta[r], kv.y * __expf(bv.y) * s.beta[r], kh[u], kl[u]);
  }
  __syncthreads();  // k and b are read: their spaces take k e^b beta and v
#pragma unroll
  for (int u = 0; u < PK; ++u) {
    const int i = tid + u * kNT, r = i / (K / 2), c = 2 * (i % (K / 2));
    st_u32(&s.r2.kbe[0][r][c], kh[u]);
    st_u32(&s.r2.kbe[1][r][c], kl[u]);
  }
  store_vt();
  __syncthreads();
  if (p.nvt > 1) load_vt(1);

  const int m0 = 16 * (warp & 3), ks1 = (warp & 3) + 1;  // X's k16 steps past the warp's rows are zero
  {  // w = X kbe: warp (m0, key columns nk0 .. nk0 + K/2)
    constexpr int NK = K / 16;
    const int nk0 = (K / 2) * (warp >> 2);
    float acc[NK][4] = {};
    warp_mma_split<NK, false, false>(acc, &s.r1.xs[0][0][0], &s.r1.xs[1][0][0], 72, m0, &s.r2.kbe[0][0][0], &s.r2.kbe[1][0][0],
                                     KB, nk0, 0, ks1, lane);
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = m0 + g + 8 * hf;
        tile_store2(img.w, r, nk0 + 8 * nt + 2 * t, r < Cn ? acc[nt][2 * hf] : 0.f, r < Cn ? acc[nt][2 * hf + 1] : 0.f);
      }
  }
  // u = X (v beta), per 64-column tile: warp (m0, columns n64 .. n64 + 32)
  const int n64 = 32 * (warp >> 2);
#pragma unroll 1
  for (int vt = 0; vt < p.nvt; ++vt) {
    if (vt > 0) {
      __syncthreads();  // the previous tile is consumed
      store_vt();
      if (vt + 1 < p.nvt) load_vt(vt + 1);
      __syncthreads();
    }
    float acc[4][4] = {};
    warp_mma_split<4, false, false>(acc, &s.r1.xs[0][0][0], &s.r1.xs[1][0][0], 72, m0, &s.r3.v[0][0][0], &s.r3.v[1][0][0], 72,
                                    n64, 0, ks1, lane);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = m0 + g + 8 * hf;
        if (r < Cn)
          st2(p.vn + ((t0 + r) * p.HV + hv) * p.V + vt * kVT + n64 + 8 * nt + 2 * t, acc[nt][2 * hf], acc[nt][2 * hf + 1]);
      }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
