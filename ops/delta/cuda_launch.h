// The CUDA backend's delta-rule launches, one per kernel family a variant table names (variants.h).
// Arguments arrive validated; each launch states what it supports and refuses the rest (lina::Error).
// Defined in ops/delta/cuda/*_launch.cu, or refusing in a build without CUDA (cuda_absent.cpp).
#pragma once
#include "lina/chunk_delta.h"
#include "ops/common/problem.h"

namespace lina::detail::cuda {

// The GDN forward's prep kernel: persistent grid over (chunk, value head) items (the default), or one
// CTA per (sequence, value head) walking its chunks in order, the timeline of a fused kernel's prep
// warpgroup (K = 128 only).
enum class GdnPrep { persistent, per_sequence };

// The backward's element-wise and chunk kernels:
//   tensor_core: prep_qk_v2 / post_qk_v2 where dq and dk are 16-byte aligned (else prep_qk / post_qk), grad_v4
//                where dO and dv are (else grad_v), and grad_k_v2;
//   scalar_qk:   as tensor_core, with prep_qk / post_qk at any alignment;
//   simt:        as tensor_core, with grad_v and the SIMT grad_k (K = 64, 128), the comparison for accuracy and time.
enum class DeltaBwdKernels { tensor_core, scalar_qk, simt };

RunInfo kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, const ExecOptions& opts);
RunInfo gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, const ExecOptions& opts, GdnPrep prep);
// The forward with its sequences cut into segments that run side by side (ops/delta/sequence_split.h), and the SM
// count it plans for (0 without a CUDA backend).
RunInfo kda_forward_split(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, const ExecOptions& opts);
RunInfo gdn_forward_split(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, const ExecOptions& opts);
int planning_sm_count();
RunInfo kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels);
RunInfo gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels);

}  // namespace lina::detail::cuda
