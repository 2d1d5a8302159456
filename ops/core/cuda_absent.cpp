// Built only without LINA_WITH_CUDA: the CUDA entry points refuse with a clear error.
#include "lina/error.h"
#include "lina/gpu_reference.h"
#include "lina/workspace.h"
#include "ops/common/backends.h"
#include "ops/delta/cuda_launch.h"

namespace lina {
namespace {
[[noreturn]] void absent() {
  throw_unsupported("backend", "cuda (this build has no CUDA backend)", "cpu tensors, or a build with LINA_WITH_CUDA=ON");
}
}  // namespace

namespace detail::cuda {
bool compiled() { return false; }
RunInfo chunk_gla_forward(const Problem&, const ChunkGlaArgs&, const AttentionOutputs&, ForwardMode, const ExecOptions&) { absent(); }
RunInfo chunk_gla_backward(const Problem&, const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, const ExecOptions&) { absent(); }
// The delta ops' launches behind their variant tables (ops/delta/variants.cpp), so the tables link and
// refuse by name in a build without CUDA.
RunInfo kda_forward(const Problem&, const ChunkKdaArgs&, const AttentionOutputs&, const ExecOptions&) { absent(); }
RunInfo gdn_forward(const Problem&, const ChunkGdnArgs&, const AttentionOutputs&, const ExecOptions&, GdnPrep) { absent(); }
RunInfo kda_forward_split(const Problem&, const ChunkKdaArgs&, const AttentionOutputs&, const ExecOptions&) { absent(); }
RunInfo gdn_forward_split(const Problem&, const ChunkGdnArgs&, const AttentionOutputs&, const ExecOptions&) { absent(); }
int planning_sm_count() { return 0; }
RunInfo kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&,
                     DeltaBwdKernels) {
  absent();
}
RunInfo gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&,
                     DeltaBwdKernels) {
  absent();
}
}  // namespace detail::cuda

namespace gpu_reference {
void chunk_gla_forward(const ChunkGlaArgs&, const AttentionOutputs&, void*) { absent(); }
void chunk_gla_backward(const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, void*) { absent(); }
void chunk_kda_forward(const ChunkKdaArgs&, const AttentionOutputs&, void*) { absent(); }
void chunk_kda_backward(const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, void*) { absent(); }
void chunk_gdn_forward(const ChunkGdnArgs&, const AttentionOutputs&, void*) { absent(); }
void chunk_gdn_backward(const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, void*) { absent(); }
}  // namespace gpu_reference
// No CUDA: no pool, nothing held.
WorkspaceStats workspace_stats(int) { return {}; }
void reset_workspace_high_water(int) {}
void release_workspace(int) {}
// Nothing allocates scratch without CUDA: the allocator is accepted and never called.
void set_workspace_allocator(const WorkspaceAllocator&) {}

}  // namespace lina
