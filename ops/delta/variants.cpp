#include "ops/delta/variants.h"

#include <string>

#include "lina/error.h"
#include "ops/delta/cuda_launch.h"
#include "ops/delta/sequence_split.h"

namespace lina::detail::delta {
namespace {

using cuda::DeltaBwdKernels;
using cuda::GdnPrep;
using KdaFwd = ForwardCall<ChunkKdaArgs>;
using GdnFwd = ForwardCall<ChunkGdnArgs>;
using KdaBwd = BackwardCall<ChunkKdaArgs>;
using GdnBwd = BackwardCall<ChunkGdnArgs>;

template <class Call>
Decline any(const Call&) {
  return std::nullopt;
}

Decline k128_only(const GdnFwd& c) {
  if (c.p.K == 128) return std::nullopt;
  return "head dim K = " + std::to_string(c.p.K) + " (the per-sequence GDN prep is built for K = 128 only)";
}

// The sequence split where its grid of segments x pairs beats the unsplit chain (sequence_split.h)
template <class Call>
Decline split_pays(const Call& c) {
  return split_declines(c.p, cuda::planning_sm_count());
}

template <class Call>
Decline simt_k(const Call& c) {
  if (c.p.K <= 128) return std::nullopt;
  return "head dim K = " + std::to_string(c.p.K) + " (the SIMT grad_v / grad_k kernels exist for K = 64 and 128)";
}

// The backward's kernels as one launch per table entry.
template <DeltaBwdKernels kKernels>
RunInfo kda_bwd(const KdaBwd& c) {
  return cuda::kda_backward(c.p, c.a, c.in, c.g, c.opts, kKernels);
}
template <DeltaBwdKernels kKernels>
RunInfo gdn_bwd(const GdnBwd& c) {
  return cuda::gdn_backward(c.p, c.a, c.in, c.g, c.opts, kKernels);
}
template <GdnPrep kPrep>
RunInfo gdn_fwd(const GdnFwd& c) {
  return cuda::gdn_forward(c.p, c.a, c.out, c.opts, kPrep);
}
RunInfo kda_fwd(const KdaFwd& c) { return cuda::kda_forward(c.p, c.a, c.out, c.opts); }
RunInfo kda_fwd_split(const KdaFwd& c) { return cuda::kda_forward_split(c.p, c.a, c.out, c.opts); }
RunInfo gdn_fwd_split(const GdnFwd& c) { return cuda::gdn_forward_split(c.p, c.a, c.out, c.opts); }

// sequence_split: few (sequence, value head) pairs with long sequences, the thin kernels over segments side by side
// (docs/kernels/chunk_delta_fwd.md, "Sequence split"); thin: the prep kernel, then the state kernel ("Thin workspace").
constexpr Variant<KdaFwd> kKdaForward[] = {
    {"sequence_split", split_pays<KdaFwd>, kda_fwd_split},
    {"thin", any<KdaFwd>, kda_fwd},
};
constexpr Variant<GdnFwd> kGdnForward[] = {
    {"sequence_split", split_pays<GdnFwd>, gdn_fwd_split},
    {"thin", any<GdnFwd>, gdn_fwd<GdnPrep::persistent>},
    {"prep_per_sequence", k128_only, gdn_fwd<GdnPrep::per_sequence>},
};
// cuda_launch.h, DeltaBwdKernels, says which kernels each runs.
constexpr Variant<KdaBwd> kKdaBackward[] = {
    {"tensor_core", any<KdaBwd>, kda_bwd<DeltaBwdKernels::tensor_core>},
    {"scalar_qk", any<KdaBwd>, kda_bwd<DeltaBwdKernels::scalar_qk>},
    {"simt", simt_k<KdaBwd>, kda_bwd<DeltaBwdKernels::simt>},
};
constexpr Variant<GdnBwd> kGdnBackward[] = {
    {"tensor_core", any<GdnBwd>, gdn_bwd<DeltaBwdKernels::tensor_core>},
    {"scalar_qk", any<GdnBwd>, gdn_bwd<DeltaBwdKernels::scalar_qk>},
    {"simt", simt_k<GdnBwd>, gdn_bwd<DeltaBwdKernels::simt>},
};

}  // namespace

std::span<const Variant<KdaFwd>> kda_forward_variants() { return kKdaForward; }
std::span<const Variant<GdnFwd>> gdn_forward_variants() { return kGdnForward; }
std::span<const Variant<KdaBwd>> kda_backward_variants() { return kKdaBackward; }
std::span<const Variant<GdnBwd>> gdn_backward_variants() { return kGdnBackward; }

RunInfo run_cuda(const KdaFwd& call) { return run_variant(kda_forward_variants(), "chunk_kda.fwd", call.opts, call); }
RunInfo run_cuda(const GdnFwd& call) { return run_variant(gdn_forward_variants(), "chunk_gdn.fwd", call.opts, call); }
RunInfo run_cuda(const KdaBwd& call) { return run_variant(kda_backward_variants(), "chunk_kda.bwd", call.opts, call); }
RunInfo run_cuda(const GdnBwd& call) { return run_variant(gdn_backward_variants(), "chunk_gdn.bwd", call.opts, call); }

}  // namespace lina::detail::delta
