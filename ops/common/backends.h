// The backend entry points behind each op's front door. Arguments arrive validated (Problem).
#pragma once
#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"
#include "ops/common/problem.h"

namespace lina::detail {

// automatic -> the device of q; a request that contradicts the tensors' device is refused.
Backend pick_backend(const Problem& p, const ExecOptions& opts);

namespace cpu {
RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts);
RunInfo chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& in, const ChunkGlaGrads& g, const ExecOptions& opts);
RunInfo chunk_kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts);
RunInfo chunk_kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g, const ExecOptions& opts);
RunInfo chunk_gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts);
RunInfo chunk_gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g, const ExecOptions& opts);
}  // namespace cpu

namespace reference {
void chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out);
void chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& in, const ChunkGlaGrads& g);
void chunk_kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out);
void chunk_kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g);
void chunk_gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out);
void chunk_gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g);
}  // namespace reference

// CUDA backend of chunk_gla (ops/gla/cuda/); the delta ops enter theirs through their variant tables
// (ops/delta/cuda_launch.h). Unsupported -> lina::Error.
namespace cuda {
bool compiled();
RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts);
RunInfo chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& in, const ChunkGlaGrads& g, const ExecOptions& opts);
}  // namespace cuda

}  // namespace lina::detail
