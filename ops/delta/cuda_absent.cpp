// Built into every library, effective only without LINA_WITH_CUDA: the delta-rule CUDA launches refuse
// with a clear error, so that the variant tables (variants.cpp) link and refuse by name in any build.
#ifndef LINA_WITH_CUDA
#include "lina/error.h"
#include "ops/delta/cuda_launch.h"

namespace lina::detail::cuda {
namespace {
[[noreturn]] void absent() {
  throw_unsupported("backend", "cuda (this build has no CUDA backend)", "cpu tensors, or a build with LINA_WITH_CUDA=ON");
}
}  // namespace

RunInfo kda_forward(const Problem&, const ChunkKdaArgs&, const AttentionOutputs&, const ExecOptions&) { absent(); }
RunInfo gdn_forward(const Problem&, const ChunkGdnArgs&, const AttentionOutputs&, const ExecOptions&, GdnPrep) { absent(); }
RunInfo kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&,
                     DeltaBwdKernels) {
  absent();
}
RunInfo gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&,
                     DeltaBwdKernels) {
  absent();
}

}  // namespace lina::detail::cuda
#endif
