// CUDA build: entry points of ops whose sm_90a kernels have not landed yet refuse clearly.
// Each op's kernel work removes its lines here and defines them under ops/<op>/cuda/.
#include "lina/error.h"
#include "lina/gpu_reference.h"
#include "ops/common/backends.h"

namespace lina::detail::cuda {

namespace {
[[noreturn]] RunInfo pending(const char* op) {
  throw_unsupported("backend", std::string("cuda for ") + op + " (its sm_90a kernels are not built yet)", "the cpu backend");
}
}  // namespace

bool compiled() { return true; }
RunInfo chunk_gla_forward(const Problem&, const ChunkGlaArgs&, const AttentionOutputs&, ForwardMode, const ExecOptions&) { pending("chunk_gla"); }
RunInfo chunk_gla_backward(const Problem&, const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, const ExecOptions&) { pending("chunk_gla"); }
RunInfo chunk_kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { pending("chunk_kda"); }
RunInfo chunk_gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { pending("chunk_gdn"); }

}  // namespace lina::detail::cuda

// GPU fp32 references (pending: ops/*/cuda/reference_*.cu define them).
namespace lina::gpu_reference {
void chunk_gla_forward(const ChunkGlaArgs&, const AttentionOutputs&, void*) { throw_unsupported("gpu_reference", "chunk_gla", "a built GPU reference"); }
void chunk_gla_backward(const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, void*) { throw_unsupported("gpu_reference", "chunk_gla", "a built GPU reference"); }
void chunk_kda_forward(const ChunkKdaArgs&, const AttentionOutputs&, void*) { throw_unsupported("gpu_reference", "chunk_kda", "a built GPU reference"); }
void chunk_kda_backward(const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, void*) { throw_unsupported("gpu_reference", "chunk_kda", "a built GPU reference"); }
void chunk_gdn_forward(const ChunkGdnArgs&, const AttentionOutputs&, void*) { throw_unsupported("gpu_reference", "chunk_gdn", "a built GPU reference"); }
void chunk_gdn_backward(const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, void*) { throw_unsupported("gpu_reference", "chunk_gdn", "a built GPU reference"); }
}  // namespace lina::gpu_reference
